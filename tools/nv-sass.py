#!/usr/bin/env python3
"""Machine code of the pipelines NVIDIA's Vulkan driver compiled (development only).

The driver keeps what it compiles in its shader disk cache. Run a program with
    __GL_SHADER_DISK_CACHE_PATH=DIR __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
and an empty HK_PIPELINE_CACHE_DIR (so that every pipeline is compiled), then
    tools/nv-sass.py DIR OUT [--nvdisasm PATH] [--arch SM90]
writes OUT/objectNNN.sass for every compiled shader and prints one line each: the code's size
(HK_PIPELINE_STATS=1 prints each pipeline's "Binary Size", which names it) and its instruction
counts (IMMA/HMMA matrix products, LDS/LDSM/STS shared memory, LDL/STL spills, PRMT byte moves).

Needs the zstd command (Debian's zstd) and nvdisasm (the CUDA toolkit, or PyPI's
nvidia-cuda-nvdisasm: nvidia/cu13/bin/nvdisasm inside its wheel).

The cache's layout, as read from driver 580 (not documented by NVIDIA; checked only there):
  NAME.toc  32-byte header ("CDVN"), then 24-byte entries: 16 bytes, u32 offset into NAME.bin,
            u32 size
  NAME.bin  at each offset a 36-byte header (u32 0x9846A19D first, u32 size at 28), then the
            object, zstd-compressed where it starts with the zstd frame magic
  object    "NVDANVVM", then an NVuc container: u32 words, "NVuc" at word 0, the section count
            in the low 16 bits of word 2, a table of 8 words per section from word 8 (type,
            length, offset in bytes from "NVuc"); type 1 is the machine code
"""
import argparse
import collections
import pathlib
import re
import struct
import subprocess
import sys

SECTION_MAGIC = 0x9846A19D
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def objects(cache_dir):
    for toc in sorted(pathlib.Path(cache_dir).rglob("*.toc")):
        index = toc.read_bytes()
        data = toc.with_suffix(".bin").read_bytes()
        for pos in range(32, len(index) - 23, 24):
            offset, size = struct.unpack_from("<II", index, pos + 16)
            if struct.unpack_from("<I", data, offset)[0] != SECTION_MAGIC:
                print(f"{toc.name}: entry at {pos}: not a cache section", file=sys.stderr)
                continue
            packed = data[offset + 36:offset + 36 + size - 4]
            if packed.startswith(ZSTD_MAGIC):
                packed = subprocess.run(["zstd", "-dc"], input=packed, capture_output=True, check=True).stdout
            yield packed


def machine_code(obj):
    start = obj.find(b"NVuc")
    if start < 0:
        return None
    nvuc = obj[start:]
    count = struct.unpack_from("<I", nvuc, 8)[0] & 0xFFFF
    for i in range(count):
        kind, length, offset = struct.unpack_from("<III", nvuc, 32 + 32 * i)
        if kind == 1 and offset + length <= len(nvuc):
            return nvuc[offset:offset + length]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--nvdisasm", default="nvdisasm")
    ap.add_argument("--arch", default="SM90")
    args = ap.parse_args()
    out = pathlib.Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    watch = ["IMMA", "HMMA", "FFMA", "FADD", "LDS", "LDSM", "STS", "LDG", "LDL", "STL", "PRMT", "BAR"]
    for n, obj in enumerate(objects(args.cache_dir)):
        code = machine_code(obj)
        if not code:
            continue
        binary = out / f"object{n:03d}.bin"
        binary.write_bytes(code)
        sass = subprocess.run([args.nvdisasm, "--binary", args.arch, str(binary)], capture_output=True, text=True)
        if sass.returncode:
            print(f"object{n:03d}: nvdisasm failed: {sass.stderr.strip()}", file=sys.stderr)
            continue
        (out / f"object{n:03d}.sass").write_text(sass.stdout)
        ops = collections.Counter(m.group(1).split(".")[0]
                                  for m in re.finditer(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)",
                                                       sass.stdout, re.M))
        print(f"object{n:03d} size {len(code)} instructions {sum(ops.values())} " +
              " ".join(f"{k}={ops[k]}" for k in watch if ops[k]))


if __name__ == "__main__":
    main()
