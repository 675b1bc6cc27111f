#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef HK_COOPMAT
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
// f16 GEMM for prefill: out[m, n] = x[m, k] . deq(W[n, k])^T, W GGUF rows (HK_Q8_0 / HK_Q4_K /
// HK_Q5_K / HK_Q6_K / HK_F16) as stored, x and out f32 row-major. Products on f16 operands (x and
// the dequantized weights rounded to f16 in shared memory), sums in f32.
//
// A workgroup computes a BM x BN tile of out: WM x WN warps, each RM x RN tiles of 16x16 held
// in registers across the whole k loop. Each k step of BK values stages x[BM rows, BK] and the
// dequantized W[BN rows, BK] in shared memory as f16 (row stride BK + 8 halves: 16-byte aligned
// rows that do not all start on one bank), then every warp multiplies its tiles. Staging is split
// into loads (global -> registers, consecutive invocations on consecutive bytes of a row) and
// stores (convert / dequantize -> shared), so that with PREFETCH the next step's loads are in
// flight while the warps multiply the current one (register double buffering). The two arms
// share all of this and differ only in the multiply and where the epilogue reads its values:
//   HK_COOPMAT  KHR cooperative matrix f16 16x16x16 -> f32; a warp is a hardware subgroup (the
//               host requires full subgroups of the device's size); accumulators go through a
//               per-warp 16x16 f32 stage in shared memory (over the tiles, after the k loop) for
//               the guarded stores;
//   default     the same tiles in plain f32 FMAs on the f16-rounded operands (exact products,
//               f32 sums): a warp is LANES consecutive invocations, no subgroup operations.
// In the 16x16 tile of out, lane l holds elements p = e*LANES + l (row p/16, column p%16), e <
// 256/LANES: the portable arm computes them, the coopmat arm reads them back from its stage.
//
// One dispatch covers k values k_begin .. k_end (the host splits a long k into passes so that
// every loop stays bounded, src/kernels/gemm.c); passes after the first add to out. Pass bounds
// are multiples of BK but for the last k_end, k, which F16 leaves anywhere (K_TAIL).
#include "common.glsl"

layout(binding = 0) readonly buffer Weights { uint16_t w16[]; };
layout(binding = 0) readonly buffer Weights32 { uint w32[]; };   // WLOAD 1: 4-byte aligned view
layout(binding = 0) readonly buffer Weights128 { uvec4 w128[]; }; // WLOAD 2: 16-byte aligned view
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(binding = 2) buffer Out { float outv[]; };

// Tiling (specialization constants 1-6; 0 is the workgroup size WG = WM * WN * LANES)
layout(constant_id = 1) const uint WM = 2;   // warps along m
layout(constant_id = 2) const uint WN = 2;   // warps along n
layout(constant_id = 3) const uint RM = 2;   // 16x16 tiles per warp along m
layout(constant_id = 4) const uint RN = 2;   // 16x16 tiles per warp along n
layout(constant_id = 5) const uint BK = 32;  // k per step: a multiple of 32 dividing 256
layout(constant_id = 6) const uint FLAGS = 0; // bit 0 PREFETCH, bits 8-9 WLOAD

const uint LANES = WG / (WM * WN);  // invocations per warp (coopmat: the subgroup size)
const uint E = 256u / LANES;        // elements of a 16x16 tile per lane
const uint BM = WM * RM * 16u;
const uint BN = WN * RN * 16u;
const uint KV = BK / 8u;            // 8-value items (uvec4 of f16) per staged row
const uint SS = KV + 1u;            // shared row stride in uvec4: BK + 8 halves
const uint SB0 = BM * SS;           // the W tile's first uvec4 in `tiles`
const bool PREFETCH = (FLAGS & 1u) != 0u; // next step's loads before this step's multiplies
// Q4_K and Q5_K weight chunks (F16 units) as wide as the view's alignment allows (gemm_q4k.glsl's
// hk_w_ld16): 2 one 16-byte load, 1 four 32-bit, 0 eight 16-bit. A constant, so that each pipeline
// holds only its own loads.
const uint WLOAD = (FLAGS >> 8) & 3u;

HK_PUSH_BEGIN
    uint m;
    uint n;
    uint k;
    uint k_begin;    // this pass's k values, multiples of BK (the last k_end: k)
    uint k_end;
    uint accumulate; // 1: add to out (passes after the first)
    uint tiles_n;    // workgroups along n
    // x's load width: a uniform branch, so that one pipeline serves either alignment of x
    uint xv4;        // 1: x is 16-byte aligned, read as vec4
HK_PUSH_END

// Both arms stage 8 halves packed in a uvec4: cooperative-matrix loads take any array type,
// counting element and stride in its units (GL_KHR_cooperative_matrix, issue 3), and a uvec4 array
// keeps every fragment's start and stride 16-byte aligned as Vulkan requires. x tile [BM][BK] at
// 0, W tile [BN][BK] (dequantized) at SB0; after the k loop the coopmat arm's per-warp stages.
shared uvec4 tiles[(BM + BN) * SS];

uint tid;

#include "gemm_dequant.glsl"

// ---- x staging: units of 4 values (one vec4 load, or four) ----
const uint XU = BK / 4u;
const uint XI = (BM * XU + WG - 1u) / WG;
vec4 xr[XI];

// x[xi] if value kk of its row is below k, else 0 (K_TAIL's last step; an `if`, as gw_half)
float x_tail(uint xi, uint kk)
{
    float v = 0.0;
    if (kk < pc.k)
        v = x[xi];
    return v;
}

void x_load(uint row0, uint k0)
{
    const uint x0 = pc.view_offset[1] / 4u;
    [[unroll]] for (uint j = 0; j < XI; j++) {
        uint it = tid + j * WG, r = it / XU, c = it % XU, row = row0 + r;
        vec4 v = vec4(0.0);
        if (it < BM * XU && row < pc.m) {
            uint kk = k0 + 4u * c, xi = x0 + row * pc.k + kk;
            if (K_TAIL && kk + 4u > pc.k)
                v = vec4(x_tail(xi, kk), x_tail(xi + 1u, kk + 1u), x_tail(xi + 2u, kk + 2u),
                         x_tail(xi + 3u, kk + 3u));
            else if (pc.xv4 != 0u)
                v = x4[xi / 4u];
            else
                v = vec4(x[xi], x[xi + 1u], x[xi + 2u], x[xi + 3u]);
        }
        xr[j] = v;
    }
}

void x_store()
{
    [[unroll]] for (uint j = 0; j < XI; j++) {
        uint it = tid + j * WG, r = it / XU, c = it % XU;
        if (it < BM * XU) {
            uvec2 p = uvec2(packHalf2x16(xr[j].xy), packHalf2x16(xr[j].zw));
            if ((c & 1u) == 0u)
                tiles[r * SS + c / 2u].xy = p;
            else
                tiles[r * SS + c / 2u].zw = p;
        }
    }
}

// The one guarded store of both arms.
void put_out(uint row, uint col, float v)
{
    if (row < pc.m && col < pc.n) {
        uint o = pc.view_offset[2] / 4u + row * pc.n + col;
        outv[o] = pc.accumulate != 0u ? outv[o] + v : v;
    }
}

void main()
{
    tid = gl_LocalInvocationIndex;
    uint group = hk_group_id();
    uint tile_m = group / pc.tiles_n, tile_n = group % pc.tiles_n;
    uint row0 = tile_m * BM, col0 = tile_n * BN;
    if (row0 >= pc.m) // the dispatch's x/y spread may launch a few groups past the last tile
        return;
#ifdef HK_COOPMAT
    uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
#else
    uint warp = gl_LocalInvocationIndex / LANES, lane = gl_LocalInvocationIndex % LANES;
#endif
    uint wm0 = (warp / WN) * RM * 16u, wn0 = (warp % WN) * RN * 16u; // the warp's rows/cols in the tile

#ifdef HK_COOPMAT
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[RM * RN];
    [[unroll]] for (uint t = 0; t < RM * RN; t++)
        acc[t] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
#else
    // acc[(i*E + e)*RN + j]: tile (i, j), element e; LANES is a multiple of 16 here, so a lane
    // keeps one column (lane % 16) and rows lane/16 + e*LANES/16 of every tile
    float acc[RM * E * RN];
    [[unroll]] for (uint t = 0; t < RM * E * RN; t++)
        acc[t] = 0.0;
    uint lc = lane % 16u, lr = lane / 16u;
#endif

    if (PREFETCH) {
        x_load(row0, pc.k_begin);
        gw_load(col0, pc.k_begin);
    }
    for (uint k0 = pc.k_begin; k0 < pc.k_end; k0 += BK) {
        if (!PREFETCH) {
            x_load(row0, k0);
            gw_load(col0, k0);
        }
        barrier(); // the previous step's multiplies are done with the tiles
        x_store();
        gw_store();
        barrier();
        if (PREFETCH && k0 + BK < pc.k_end) {
            x_load(row0, k0 + BK);
            gw_load(col0, k0 + BK);
        }
#ifdef HK_COOPMAT
        [[unroll]] for (uint kc = 0; kc < BK / 16u; kc++) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b[RN];
            // B = W^T: column j of B is row j of the W tile, k contiguous
            [[unroll]] for (uint j = 0; j < RN; j++)
                coopMatLoad(b[j], tiles, SB0 + (wn0 + 16u * j) * SS + 2u * kc, SS, gl_CooperativeMatrixLayoutColumnMajor);
            [[unroll]] for (uint i = 0; i < RM; i++) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
                coopMatLoad(a, tiles, (wm0 + 16u * i) * SS + 2u * kc, SS, gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint j = 0; j < RN; j++)
                    acc[i * RN + j] = coopMatMulAdd(a, b[j], acc[i * RN + j]);
            }
        }
#else
        [[unroll]] for (uint c = 0; c < KV; c++) {
            vec4 blo[RN], bhi[RN];
            [[unroll]] for (uint j = 0; j < RN; j++) {
                uvec4 v = tiles[SB0 + (wn0 + 16u * j + lc) * SS + c];
                blo[j] = vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
                bhi[j] = vec4(unpackHalf2x16(v.z), unpackHalf2x16(v.w));
            }
            [[unroll]] for (uint ie = 0; ie < RM * E; ie++) {
                uvec4 v = tiles[(wm0 + 16u * (ie / E) + lr + (ie % E) * (LANES / 16u)) * SS + c];
                vec4 alo = vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
                vec4 ahi = vec4(unpackHalf2x16(v.z), unpackHalf2x16(v.w));
                [[unroll]] for (uint j = 0; j < RN; j++)
                    acc[ie * RN + j] += dot(alo, blo[j]) + dot(ahi, bhi[j]);
            }
        }
#endif
    }

    // epilogue: lane's element e of tile (i, j) is p = e*LANES + lane
#ifdef HK_COOPMAT
    barrier(); // every warp is done with the tiles: they hold the per-warp stages now
#endif
    [[unroll]] for (uint t = 0; t < RM * RN; t++) {
        uint i = t / RN, j = t % RN;
#ifdef HK_COOPMAT
        coopMatStore(acc[t], tiles, warp * 64u, 4u, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
#endif
        [[unroll]] for (uint e = 0; e < E; e++) {
            uint p = e * LANES + lane;
#ifdef HK_COOPMAT
            float v = uintBitsToFloat(tiles[warp * 64u + p / 4u][p % 4u]);
#else
            float v = acc[(i * E + e) * RN + j];
#endif
            put_out(row0 + wm0 + 16u * i + p / 16u, col0 + wn0 + 16u * j + p % 16u, v);
        }
#ifdef HK_COOPMAT
        subgroupBarrier(); // every lane has read the stage before the next tile overwrites it
#endif
    }
}
