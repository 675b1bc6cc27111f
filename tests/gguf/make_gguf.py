#!/usr/bin/env python3
"""Test data from another producer: gguf-py (the `gguf` package on PyPI) and numpy.

Writes, into OUT_DIR (the build tree; nothing here is committed):

  hk-gguf-test.gguf           a real GGUF v3 model file written by gguf.GGUFWriter: metadata of
                              every value type, weights at real row widths (2048, 768), expert
                              banks [experts, n, k], F16 tensors (every f16 bit pattern, and an
                              F16 weight matrix) and an F32 one, the activations x
                              and a MoE routing, all seeded
  hk-gguf-test-expected.gguf  what gguf-py and numpy say about every tensor of that file, read back
                              through gguf.GGUFReader: its dequantization (gguf.quants.dequantize,
                              f32), numpy's double-precision matvec deq(W) @ x, the MoE outputs of
                              the routing, and the f32 rows gguf-py quantized to Q8_0

For hk-check --gguf (tests/gguf/check.sh), also from the model file: hk-gguf-test-v2.gguf (the same
bytes as GGUF version 2, which differs from 3 only for big-endian files), hk-gguf-truncated.gguf
(cut inside the last tensor's data), hk-gguf-bad-count.gguf (a tensor count of 2^60 in the header)
and hk-gguf-bad-magic.gguf. The model file also holds tensors no kernel takes (IQ4_NL, a 1-D F32
norm) that hk-check must list as skipped.

The expectations live in a second GGUF file rather than in the model file or a binary of our own:
the model file's tensor data region stays exactly a model's (tests/test_gguf.c uploads that region
to the GPU as it is, so it should hold weights and inputs only), while one reader, the test's own,
reads both files by tensor name and shape with no second format to get wrong. The expected file
sets general.alignment to 64 and the model file leaves it out (default 32), so the reader's
alignment rule is exercised both ways. Matvecs are stored as F64: numpy's double sums, unrounded.

Weights: Q8_0 is quantized by gguf-py itself from random f32 rows (one block with exact .5 ties,
one all-zero block); Q4_K, Q5_K and Q6_K are raw random blocks (random bytes, every f16 field set to
a finite value, so every quant and scale bit pattern occurs); small hand-made edge tensors per type
(f16 scales at +-65504 with the extreme quants and scales, subnormal and zero scales).

usage: make_gguf.py OUT_DIR
"""
import importlib.metadata
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

SEED = 0x68_6B_67_67  # "hkgg"
MODEL = "hk-gguf-test.gguf"
EXPECTED = "hk-gguf-test-expected.gguf"

BLOCK = {T.Q8_0: (32, 34), T.Q4_K: (256, 144), T.Q5_K: (256, 176), T.Q6_K: (256, 210)}  # values, bytes per block
F16_FIELDS = {T.Q8_0: (0,), T.Q4_K: (0, 2), T.Q5_K: (0, 2), T.Q6_K: (208,)}  # byte offsets of f16 fields (d, dmin)
SCALE_BYTES = {T.Q4_K: (4, 16), T.Q5_K: (4, 16), T.Q6_K: (192, 208)}  # [from, to) of the sub-block scales
QUANT_BYTES = {T.Q8_0: (2, 34), T.Q4_K: (16, 144), T.Q5_K: (16, 176), T.Q6_K: (0, 192)}  # Q5_K: qh, then qs

# MoE routing, as a u32 tensor in the file (stored as I32; -1 is 0xFFFFFFFF): a repeat, an id one
# past the experts of an 8-expert bank, and "none" (the router's id when too few logits are numbers)
MOE_IDS = [3, 8, 3, 0, 7, -1]


def row_bytes(qtype, k):
    bv, bb = BLOCK[qtype]
    return k // bv * bb


def raw_blocks(rng, qtype, lead, k, scale=0.05):
    """Random GGUF blocks for a tensor of shape (*lead, k): random bytes, every f16 field set to a
    finite value in [-scale, scale] (random bytes there could be inf or NaN)."""
    bv, bb = BLOCK[qtype]
    n_blocks = int(np.prod(lead)) * k // bv
    b = rng.integers(0, 256, size=(n_blocks, bb), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        f = rng.uniform(-scale, scale, size=n_blocks).astype(np.float16)
        b[:, off:off + 2] = f.view(np.uint8).reshape(n_blocks, 2)
    return b.reshape(*lead, row_bytes(qtype, k))


def edge_blocks(rng, qtype, kind, rows=2, k=256):
    """Hand-made blocks: random quants with chosen f16 fields (and, for 'big', extreme scales and
    quants), so the decode of every f16 class is checked: the largest finite values, subnormals,
    signed zeros."""
    halves = {
        "big": [0x7BFF, 0xFBFF, 0x7A00, 0xFBFF],  # +-65504, 49152
        "small": [0x0001, 0x03FF, 0x8001, 0x0400, 0x8200],  # subnormals, the smallest normal
        "zero": [0x0000, 0x8000],  # +0, -0
    }[kind]
    b = raw_blocks(rng, qtype, (rows,), k).reshape(-1, BLOCK[qtype][1])
    h = np.array(halves, dtype=np.uint16)
    for i, off in enumerate(F16_FIELDS[qtype]):
        pick = h[(np.arange(b.shape[0]) + i) % len(h)]
        b[:, off:off + 2] = pick.view(np.uint8).reshape(-1, 2)
    if kind == "big":
        q0, q1 = QUANT_BYTES[qtype]
        if qtype == T.Q8_0:
            b[0::2, q0:q1] = np.where(np.arange(q1 - q0) % 2, 0x7F, 0x80)  # -128, 127
        else:
            s0, s1 = SCALE_BYTES[qtype]
            if qtype in (T.Q4_K, T.Q5_K):
                b[0::2, s0:s1] = 0xFF  # every sub-block scale and min 63
            else:
                b[0::2, s0:s1] = 0x80  # scale -128
                b[1::2, s0:s1] = 0x7F  # scale 127
            b[0::2, q0:q1] = 0xFF  # Q4_K q=15; Q5_K q=31 (every 5th bit set); Q6_K q=63 (31 after the -32)
    return b.reshape(rows, row_bytes(qtype, k))


def q8_0_source(rng, rows, k):
    """f32 rows of different magnitude and sign balance, as gguf-py would get them from a model;
    row 0 starts with a block of exact .5 ties (amax 127 makes d exactly 1) and an all-zero block."""
    x = np.empty((rows, k), dtype=np.float32)
    for r in range(rows):
        scale = rng.uniform(0.01, 0.5)
        x[r] = rng.uniform(-scale, scale, size=k) + rng.uniform(-0.2, 0.2) * scale
    ties = [127.0, 2.5, -3.5, 0.5, -0.5, 126.5, -126.5, 1.5] + [-2.5, 3.5, 4.5, -5.5] * 6
    x[0, :32] = np.array(ties, dtype=np.float32)
    x[0, 32:64] = 0.0
    return x


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_gguf.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(SEED)

    tensors = {}  # name -> (array as written, raw_dtype or None)
    sources = {}  # Q8_0 name -> the f32 rows gguf-py quantized
    x_of = {}     # weight name -> name of the x it multiplies

    # activations first: one f32 x per k, one x per routed slot for the down projection
    for k in (2048, 768, 512, 256):
        tensors[f"x.{k}"] = (rng.uniform(-1.0, 1.0, size=k).astype(np.float32), None)
    tensors["x.768.slots"] = (rng.uniform(-1.0, 1.0, size=(len(MOE_IDS), 768)).astype(np.float32), None)
    tensors["moe.ids"] = (np.array(MOE_IDS, dtype=np.int32), None)

    # dense weights at real row widths (Qwen3-1.7B hidden 2048; Qwen3-30B-A3B expert width 768)
    for k, rows in ((2048, 6), (768, 5)):
        src = q8_0_source(rng, rows, k)
        name = f"q8_0.{k}"
        sources[name] = src
        tensors[name] = (quantize(src, T.Q8_0), T.Q8_0)
        x_of[name] = f"x.{k}"
    for qtype, tag in ((T.Q4_K, "q4_k"), (T.Q5_K, "q5_k"), (T.Q6_K, "q6_k")):
        for k, rows in ((2048, 6), (768, 5)):
            name = f"{tag}.{k}"
            tensors[name] = (raw_blocks(rng, qtype, (rows,), k), qtype)
            x_of[name] = f"x.{k}"
    for qtype, tag in ((T.Q8_0, "q8_0"), (T.Q4_K, "q4_k"), (T.Q5_K, "q5_k"), (T.Q6_K, "q6_k")):
        for kind in ("big", "small", "zero"):
            name = f"{tag}.edge_{kind}"
            tensors[name] = (edge_blocks(rng, qtype, kind), qtype)
            x_of[name] = "x.256"

    # expert banks [experts, n, k] (GGUF dims k, n, experts), as Qwen3-30B-A3B stores them (its
    # Q5_K_M files: gate/up Q5_K)
    moe = {
        "blk.0.ffn_gate_exps.weight": (T.Q4_K, 8, 8, 2048, "x.2048"),
        "blk.0.ffn_down_exps.weight": (T.Q6_K, 8, 16, 768, "x.768.slots"),
        "blk.1.ffn_up_exps.weight": (T.Q8_0, 4, 8, 512, "x.512"),
        "blk.1.ffn_gate_exps.weight": (T.Q5_K, 8, 8, 2048, "x.2048"),
    }
    for name, (qtype, experts, n, k, xname) in moe.items():
        if qtype == T.Q8_0:
            src = q8_0_source(rng, experts * n, k).reshape(experts, n, k)
            sources[name] = src
            tensors[name] = (quantize(src, T.Q8_0), T.Q8_0)
        else:
            tensors[name] = (raw_blocks(rng, qtype, (experts, n), k), qtype)
        x_of[name] = xname

    # tensors no kernel takes, which hk-check lists as skipped: raw IQ blocks, a norm
    tensors["iq4_nl.unsupported"] = (rng.integers(0, 256, size=(3, 2 * 18), dtype=np.uint8), T.IQ4_NL)
    tensors["blk.0.attn_norm.weight"] = (rng.uniform(0.5, 1.5, size=256).astype(np.float32), None)

    # every f16 bit pattern once (subnormals, infinities, NaNs), and an f32 router gate
    tensors["f16.all"] = (np.arange(65536, dtype=np.uint16).view(np.float16).reshape(32, 2048), None)
    # an F16 weight matrix, as files keep some unquantized: real rows rounded to f16, with
    # subnormals, the smallest normal and signed zeros among them
    f16w = q8_0_source(rng, 6, 2048).astype(np.float16)
    f16w[1, 100:106] = np.array([0x0001, 0x03FF, 0x8001, 0x0400, 0x0000, 0x8000], dtype=np.uint16).view(np.float16)
    tensors["f16.2048"] = (f16w, None)
    x_of["f16.2048"] = "x.2048"
    tensors["f32.router"] = (rng.uniform(-0.1, 0.1, size=(16, 2048)).astype(np.float32), None)
    x_of["f32.router"] = "x.2048"

    w = gguf.GGUFWriter(os.path.join(out, MODEL), arch="hktest")
    # metadata of every value type, strings and arrays (nested too): the reader must skip them all
    w.add_name("hk gguf test")
    w.add_quantization_version(2)
    w.add_uint8("hktest.u8", 200)
    w.add_int8("hktest.i8", -5)
    w.add_uint16("hktest.u16", 60000)
    w.add_int16("hktest.i16", -30000)
    w.add_uint32("hktest.block_count", 2)
    w.add_int32("hktest.i32", -123456)
    w.add_float32("hktest.f32", 0.25)
    w.add_bool("hktest.bool", True)
    w.add_uint64("hktest.expert_count", 8)
    w.add_int64("hktest.i64", -(1 << 40))
    w.add_float64("hktest.f64", 1e300)
    w.add_array("tokenizer.ggml.tokens", ["<s>", "x", "h\u00e9llo", "\u2581" * 100, "a" * 300])
    w.add_array("tokenizer.ggml.scores", [0.0, -1.5, 2.25, 3.0, -4.0])
    w.add_array("hktest.bools", [True, False, True])
    w.add_array("hktest.nested", [[1, 2, 3], [4], [5, 6]])
    w.add_array("hktest.nested_strings", [["a", "bc"], ["def"]])
    for name, (arr, raw) in tensors.items():
        w.add_tensor(name, arr, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # the expectations come from the file as written, read back by gguf-py's own reader
    r = gguf.GGUFReader(os.path.join(out, MODEL))
    read = {t.name: t for t in r.tensors}
    assert list(read) == list(tensors), "GGUFReader lists other tensors than were written"
    deq = {}
    for name, t in read.items():
        want = tensors[name][0]
        assert np.array_equal(np.asarray(t.data).view(np.uint8).ravel(), want.view(np.uint8).ravel()), name
        if t.tensor_type in (T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K, T.F16):  # (F32 dequantizes to itself)
            deq[name] = np.asarray(dequantize(np.asarray(t.data), t.tensor_type), dtype=np.float32).reshape(
                want.shape[:-1] + (-1,))

    e = gguf.GGUFWriter(os.path.join(out, EXPECTED), arch="hktest-expected")
    e.add_custom_alignment(64)
    e.add_string("hktest.model", MODEL)
    e.add_string("hktest.moe_ids", "moe.ids")
    xs = {name: tensors[name][0].astype(np.float64) for name in tensors if name.startswith("x.")}
    ids = np.array(MOE_IDS, dtype=np.int64) & 0xFFFFFFFF
    deq["f32.router"] = tensors["f32.router"][0]
    for name, d in deq.items():
        if name != "f32.router":
            e.add_tensor(f"{name}.deq", d)
        if name not in x_of:
            continue
        xname = x_of[name]
        e.add_string(f"hktest.x.{name}", xname)
        d64 = d.astype(np.float64)
        x = xs[xname]
        if name in moe:
            experts, n = d.shape[0], d.shape[1]
            xs_slot = x if x.ndim == 2 else np.broadcast_to(x, (len(MOE_IDS), x.shape[0]))
            y = np.zeros((len(MOE_IDS), n), dtype=np.float64)
            for s, i in enumerate(ids):
                if i < experts:
                    y[s] = d64[i] @ xs_slot[s]
            e.add_tensor(f"{name}.moe", y)
            e.add_uint32(f"hktest.x_per_slot.{name}", int(x.ndim == 2))
            if x.ndim == 1:  # the bank as one [experts*n, k] matrix
                e.add_tensor(f"{name}.matvec", d64.reshape(-1, d.shape[-1]) @ x)
        else:
            e.add_tensor(f"{name}.matvec", d64 @ x)
    for name, src in sources.items():
        e.add_tensor(f"{name}.source", src)
    e.write_header_to_file()
    e.write_kv_data_to_file()
    e.write_tensors_to_file()
    e.close()

    # damaged and older-version copies of the model file for hk-check --gguf
    model_bytes = open(os.path.join(out, MODEL), "rb").read()
    assert model_bytes[4:8] == (3).to_bytes(4, "little")
    open(os.path.join(out, "hk-gguf-test-v2.gguf"), "wb").write(model_bytes[:4] + (2).to_bytes(4, "little") + model_bytes[8:])
    open(os.path.join(out, "hk-gguf-truncated.gguf"), "wb").write(model_bytes[:len(model_bytes) - 1000])
    open(os.path.join(out, "hk-gguf-bad-count.gguf"), "wb").write(model_bytes[:8] + (1 << 60).to_bytes(8, "little") + model_bytes[16:])
    open(os.path.join(out, "hk-gguf-bad-magic.gguf"), "wb").write(b"GGUG" + model_bytes[4:])

    size = os.path.getsize(os.path.join(out, MODEL))
    assert size < 1 << 20, f"{MODEL} is {size} bytes: keep it small"
    print(f"make_gguf.py: gguf {importlib.metadata.version('gguf')}, numpy {np.__version__}: wrote {MODEL} "
          f"({size} bytes, {len(tensors)} tensors) and {EXPECTED} "
          f"({os.path.getsize(os.path.join(out, EXPECTED))} bytes)")


if __name__ == "__main__":
    main()
