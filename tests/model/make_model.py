#!/usr/bin/env python3
"""Tiny random models of the architectures hk-run runs, for the model test (check.py).

usage: make_model.py OUT.gguf --arch {llama,qwen2,qwen3,qwen3moe} --seed S [--types mixed|q8|kquant]
                     [--rope-freqs]

Written by tools/synthetic_gguf.py (metadata keys and tensor names as llama.cpp's convert script
writes them). Small enough for lavapipe, with the structure of the real models: n_embd 256, 2
layers, grouped-query attention (2 kv heads), every K-quant matrix's k a multiple of 256.

  llama     SentencePiece vocabulary of 1001, 4 heads of 64, ff 768
  qwen2     byte-level BPE vocabulary of 1536, q/k/v biases, 4 heads of 64, ff 512, tied embeddings
            (no output.weight)
  qwen3     vocabulary of 3000, q/k norms, 4 heads of 128: head_dim != n_embd / n_head, so
            attention.key_length must be read
  qwen3moe  vocabulary of 2500, q/k norms, 8 heads of 64, 8 experts (ff 256) of which 2 are used,
            an F32 router, routing clear of ties by construction (below)

An engine's rounding (Q8_1 activations) moves router logits by a few hundredths; where two experts'
logits are that close, it may pick the other one, a jump in the output that no tolerance covers.
So the qwen3moe model routes by a code: each token's embedding holds 2.0 and 1.5 at the dims of
its two experts (dims 0..7, one per expert, 0 elsewhere), no layer writes those dims of the residual
(attn_output's and ffn_down_exps' rows 0..7 are zero), and the router reads them with gain 2 over a
small random part: the chosen experts' logits lead the others by about 2 or more, while their
weights still depend on the context (the RMSNorm scale, the random part). The code is written as
values, so a K-quant embedding (--types kquant) becomes Q8_0 there.

--types: "mixed" (the default) spreads each model's matrices over Q8_0, Q4_K, Q5_K, Q6_K, F16 (llama:
K-quants with one F32 projection, blk.1.attn_v); "q8" makes them Q8_0 and F16; "kquant" Q4_K, Q5_K
and Q6_K. Routers stay F32 (llama.cpp never quantizes them). --rope-freqs (llama) adds Llama 3.1's
rope_freqs.weight.
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import LlamaFileType

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import synthetic_gguf as sg  # noqa: E402

ARCHS = ("llama", "qwen2", "qwen3", "qwen3moe")
TYPES = ("mixed", "q8", "kquant")


def config(arch, types="mixed", rope_freqs=False):
    common = dict(n_embd=256, n_layer=2, n_head_kv=2, n_ctx=512)
    qwen = dict(rope_base=1000000.0, eps=1e-6, tokenizer="gpt2", tokenizer_pre="qwen2")
    if arch == "llama":
        cfg = sg.Config("llama", "hk tiny llama", n_vocab=1001, n_head=4, head_dim=64, n_ff=768,
                        rope_base=10000.0, eps=1e-5, rope_freqs=rope_freqs, **common)
    elif arch == "qwen2":
        cfg = sg.Config("qwen2", "hk tiny qwen2", n_vocab=1536, n_head=4, head_dim=64, n_ff=512, tied=True,
                        **common, **qwen)
    elif arch == "qwen3":
        cfg = sg.Config("qwen3", "hk tiny qwen3", n_vocab=3000, n_head=4, head_dim=128, n_ff=768,
                        key_length=True, **common, **qwen)
    elif arch == "qwen3moe":
        cfg = sg.Config("qwen3moe", "hk tiny qwen3moe", n_vocab=2500, n_head=8, head_dim=64, n_ff=768,
                        n_expert=8, n_expert_used=2, n_ff_exp=256, key_length=True, **common, **qwen)
    else:
        raise ValueError(f"unknown architecture {arch!r}")
    if rope_freqs and arch != "llama":
        raise ValueError("--rope-freqs is for llama")
    cfg.file_type = LlamaFileType.MOSTLY_Q8_0 if types == "q8" else LlamaFileType.MOSTLY_Q4_K_M
    return cfg


# per model, each matrix role's type (a list: per layer)
MIXED = {
    "llama": {"token_embd": T.Q4_K, "attn_q": T.Q4_K, "attn_k": T.Q5_K, "attn_v": [T.Q6_K, T.F32],
              "attn_output": T.Q5_K, "ffn_gate": T.Q4_K, "ffn_up": [T.Q5_K, T.Q4_K], "ffn_down": T.Q6_K,
              "output": T.Q6_K},
    "qwen2": {"token_embd": T.Q8_0, "attn_q": T.Q4_K, "attn_k": T.Q8_0, "attn_v": T.Q6_K,
              "attn_output": T.Q4_K, "ffn_gate": T.Q5_K, "ffn_up": T.Q4_K, "ffn_down": [T.Q6_K, T.Q8_0]},
    "qwen3": {"token_embd": T.Q6_K, "attn_q": T.Q8_0, "attn_k": T.Q4_K, "attn_v": T.Q5_K,
              "attn_output": T.Q6_K, "ffn_gate": [T.Q4_K, T.F16], "ffn_up": T.Q8_0, "ffn_down": T.Q4_K,
              "output": T.Q8_0},
    "qwen3moe": {"token_embd": T.Q8_0, "attn_q": T.Q5_K, "attn_k": T.Q5_K, "attn_v": T.Q6_K,
                 "attn_output": T.Q5_K, "ffn_gate_inp": T.F32, "ffn_gate_exps": T.Q4_K,
                 "ffn_up_exps": [T.Q8_0, T.Q4_K], "ffn_down_exps": [T.Q6_K, T.Q5_K], "output": T.Q6_K},
}
Q8 = {"attn_k": T.F16, "attn_output": T.F16, "ffn_up": [T.F16, T.Q8_0], "output": T.F16}
KQUANT = {"token_embd": T.Q4_K, "attn_q": T.Q4_K, "attn_k": T.Q5_K, "attn_v": T.Q6_K, "attn_output": T.Q5_K,
          "ffn_gate": T.Q4_K, "ffn_up": T.Q5_K, "ffn_down": T.Q6_K, "ffn_gate_exps": T.Q4_K,
          "ffn_up_exps": T.Q5_K, "ffn_down_exps": T.Q6_K, "output": T.Q6_K}


def type_of(arch, types):
    table = MIXED[arch] if types == "mixed" else Q8 if types == "q8" else KQUANT

    def pick(role, layer):
        if role == "ffn_gate_inp":
            return T.F32
        t = table.get(role, T.Q8_0)
        return t[layer] if isinstance(t, list) else t
    return pick


CODE = (2.0, 1.5)     # a token's embedding at the dims of its first and second expert
ROUTER_CODE = 2.0     # the router's weight on an expert's own code dim
ROUTER_RANDOM = 0.3   # the random part's share of the usual router weights


def routing_codes(cfg, specs, rng):
    """The qwen3moe model's routing by code (see the docstring)."""
    n = cfg.n_expert
    pairs = np.array([rng.choice(n, 2, replace=False) for _ in range(cfg.n_vocab)])

    def embedding(v):
        v[:, :n] = 0
        v[np.arange(len(v)), pairs[:, 0]] = CODE[0]
        v[np.arange(len(v)), pairs[:, 1]] = CODE[1]
        return v

    def router(v):
        v *= ROUTER_RANDOM
        v[np.arange(n), np.arange(n)] += ROUTER_CODE
        return v

    for s in specs:
        if s.name == "token_embd.weight":
            if s.qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
                s.qtype = T.Q8_0
            s.edit_values = embedding
        elif s.name.endswith(("attn_output.weight", "ffn_down_exps.weight")):
            s.zero_rows = tuple(range(n))
        elif s.name.endswith("ffn_gate_inp.weight"):
            s.edit_values = router


def build(path, arch, seed, types="mixed", rope_freqs=False, edit=None, write_arch=None):
    """Writes the model; edit(specs), if given, changes its tensor list first (check.py's bad
    models), write_arch replaces general.architecture (and the keys' prefix). Returns its Config."""
    cfg = config(arch, types, rope_freqs)
    specs = sg.plan(cfg, type_of(arch, types))
    if cfg.n_expert:
        routing_codes(cfg, specs, np.random.default_rng([seed, 1]))
    if edit:
        specs = edit(specs)
    sg.write(path, cfg, specs, np.random.default_rng(seed), arch=write_arch)
    return cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--arch", required=True, choices=ARCHS)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--types", default="mixed", choices=TYPES)
    ap.add_argument("--rope-freqs", action="store_true")
    a = ap.parse_args()
    build(a.out, a.arch, a.seed, a.types, a.rope_freqs)


if __name__ == "__main__":
    main()
