#!/usr/bin/env python3
"""A full-size random GGUF model with a real model's shapes and llama.cpp's Q4_K_M type mix, for
running hk-run on a GPU without downloading weights. Needs only numpy and gguf (pip install gguf).

usage: make-synthetic-model.py --shape llama3-8b|qwen3-30b-a3b --out FILE [--layers N] [--seed S]

  llama3-8b      Llama-3-8B: n_embd 4096, 32 layers, 32 heads, 8 kv heads (head_dim 128), ff 14336,
                 vocab 128256, rope base 500000, byte-level BPE (llama-bpe)
  qwen3-30b-a3b  Qwen3-30B-A3B: n_embd 2048, 48 layers, 32 heads, 4 kv heads, head_dim 128 (key_length),
                 q/k norms, 128 experts of ff 768 with 8 used, an F32 router, vocab 151936, rope base
                 1000000, byte-level BPE (qwen2)

--layers N keeps the first N layers (block_count N), for a smaller file with the same per-layer
shapes: 8 layers of llama3-8b are about 2.1 GB. Types as llama-quantize's Q4_K_M picks them for
these models: token_embd, attn_q, attn_k, attn_output, ffn_gate(_exps), ffn_up(_exps) Q4_K;
attn_v and ffn_down(_exps) Q6_K in the layers llama.cpp's use_more_bits picks (the first and last
eighth, and every third between), Q4_K in the others; output Q6_K; norms and the router F32.
Metadata keys and tensor names are llama.cpp's (tools/synthetic_gguf.py, shared with the model
test's tiny models); weights are random valid blocks with magnitudes that keep activations sane,
so logits are finite but meaningless. Each tensor is generated just before it is written.

example (a GPU machine; hk-run as the lead's engine runs it):
  python3 tools/make-synthetic-model.py --shape llama3-8b --layers 8 --out /tmp/l8b.gguf
  build/hk-run /tmp/l8b.gguf --tokens 1,2,3,4 -n 32
"""
import argparse
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from gguf import GGMLQuantizationType as T  # noqa: E402

import synthetic_gguf as sg  # noqa: E402

SHAPES = {
    "llama3-8b": sg.Config("llama", "Llama-3-8B synthetic", n_vocab=128256, n_embd=4096, n_layer=32, n_head=32,
                           n_head_kv=8, head_dim=128, n_ff=14336, n_ctx=8192, rope_base=500000.0, eps=1e-5,
                           tokenizer="gpt2", tokenizer_pre="llama-bpe"),
    "qwen3-30b-a3b": sg.Config("qwen3moe", "Qwen3-30B-A3B synthetic", n_vocab=151936, n_embd=2048, n_layer=48,
                               n_head=32, n_head_kv=4, head_dim=128, n_ff=6144, n_ctx=40960, rope_base=1000000.0,
                               eps=1e-6, n_expert=128, n_expert_used=8, n_ff_exp=768, key_length=True,
                               tokenizer="gpt2", tokenizer_pre="qwen2"),
}


def use_more_bits(i, n):
    """llama.cpp's choice of the layers whose attn_v and ffn_down Q4_K_M makes Q6_K."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def q4_k_m(n_layer):
    """Q4_K_M's type of each matrix role (llama_tensor_get_type, for models without 8 experts)."""
    def pick(role, layer):
        if role == "output":
            return T.Q6_K
        if role == "ffn_gate_inp":
            return T.F32
        if role in ("attn_v", "ffn_down", "ffn_down_exps") and use_more_bits(layer, n_layer):
            return T.Q6_K
        return T.Q4_K
    return pick


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, help="the first N layers only (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    cfg = SHAPES[a.shape]
    if a.layers is not None:
        if not 1 <= a.layers <= cfg.n_layer:
            ap.error(f"--layers must be 1..{cfg.n_layer} for {a.shape}")
        cfg.n_layer = a.layers
    specs = sg.plan(cfg, q4_k_m(cfg.n_layer))
    start = time.time()
    written = [0]

    def progress(s):
        written[0] += 1
        if written[0] % 50 == 0 or written[0] == len(specs):
            print(f"{written[0]}/{len(specs)} tensors, {os.path.getsize(a.out) / 2**30:.2f} GiB, "
                  f"{time.time() - start:.1f} s", file=sys.stderr, flush=True)

    sg.write(a.out, cfg, specs, np.random.default_rng(a.seed), progress=progress)
    print(f"{a.out}: {cfg.name}, {cfg.n_layer} layers, {len(specs)} tensors, "
          f"{os.path.getsize(a.out) / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
