#!/usr/bin/env python3
"""The model test's reference: a forward pass in numpy, from the architectures' math.

Reads a .gguf with gguf.GGUFReader, dequantizes every tensor with gguf.quants.dequantize and
computes in float64; shares no code with libhkernel. Architectures: llama, qwen2, qwen3, qwen3moe.

  h = embedding[token]
  per layer:  a = rmsnorm(h) * attn_norm
              q, k, v = Wq a, Wk a, Wv a  (+ biases: qwen2); per head
              q, k = rmsnorm(q) * attn_q_norm, rmsnorm(k) * attn_k_norm  (qwen3, qwen3moe)
              q, k rotated by RoPE: llama pairs (2i, 2i+1) (ggml's "normal" mode), the qwens pairs
                (i, i + d/2) (NeoX); angle pos * base^(-2i/d) / rope_freqs[i]
              causal attention, query head j on kv head j / (n_head / n_head_kv), scale 1/sqrt(d)
              h += Wo attn
              f = rmsnorm(h) * ffn_norm
              h += Wdown (silu(Wgate f) * Wup f), or for qwen3moe the experts': router logits
                Wr f, softmax over all experts, the top k by logit, their probabilities
                renormalized to sum 1, the sum of their SwiGLU FFNs weighted by them
  logits = Woutput (rmsnorm(h) * output_norm)  (Woutput = the embedding where output.weight is absent)
  rmsnorm(x) = x / sqrt(mean(x^2) + eps)

Model(path, int8=True) is instead a model of an engine's int8 path, for sizing the model test's
tolerances: the input of every matrix of a quantized type rounded to Q8_1 (per 32 values, d =
max|x| / 127 rounded to f16, q = round(x / d)), K and V rounded to f16.

usage: forward.py MODEL.gguf --tokens 1,2,3,... --prompt-len P [--int8]
prints the logits rows hk-run's --logits writes (the prompt's last position, then each decode step)
as their argmax and top-2 margin.
"""
import argparse

import numpy as np

import gguf
from gguf.quants import dequantize

ARCHS = ("llama", "qwen2", "qwen3", "qwen3moe")


class Model:
    def __init__(self, path, int8=False):
        self.int8 = int8
        r = gguf.GGUFReader(path)
        self.meta = {f.name: f.contents() for f in r.fields.values()}
        self.arch = self.meta["general.architecture"]
        if self.arch not in ARCHS:
            raise ValueError(f"{path}: architecture {self.arch!r}")
        get = lambda key, default=None: self.meta.get(f"{self.arch}.{key}", default)  # noqa: E731
        self.n_embd = get("embedding_length")
        self.n_layer = get("block_count")
        self.n_head = get("attention.head_count")
        self.n_head_kv = get("attention.head_count_kv", self.n_head)
        self.head_dim = get("attention.key_length", self.n_embd // self.n_head)
        self.eps = get("attention.layer_norm_rms_epsilon")
        self.rope_base = get("rope.freq_base", 10000.0)
        self.n_expert = get("expert_count", 0)
        self.n_expert_used = get("expert_used_count", 0)
        self.neox = self.arch != "llama"
        self.w = {}
        self.quantized = {t.name for t in r.tensors if t.tensor_type not in (gguf.GGMLQuantizationType.F32,
                                                                            gguf.GGMLQuantizationType.F16)}
        for t in r.tensors:
            w = dequantize(t.data, t.tensor_type).astype(np.float64)
            want = tuple(int(n) for n in reversed(t.shape))
            if w.shape != want:
                raise ValueError(f"{t.name}: dequantized to {w.shape}, want {want}")
            self.w[t.name] = w
        self.n_vocab = self.w["token_embd.weight"].shape[0]
        self.lm_head = "output.weight" if "output.weight" in self.w else "token_embd.weight"
        self.router_margin = np.inf  # the last forward's smallest k-th minus (k+1)-th router logit

    def mm(self, x, name, expert=None):
        """x @ W.T for the matrix `name` (of one expert)."""
        w = self.w[name] if expert is None else self.w[name][expert]
        if self.int8 and name in self.quantized:
            x = q8_1(x)
        return x @ w.T

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        """x: (T, heads, d) at positions pos (T,)."""
        d = x.shape[-1]
        theta = self.rope_base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        if "rope_freqs.weight" in self.w:
            theta = theta / self.w["rope_freqs.weight"]
        ang = pos[:, None, None] * theta  # (T, 1, d/2)
        cos, sin = np.cos(ang), np.sin(ang)
        if self.neox:
            x0, x1 = x[..., : d // 2], x[..., d // 2:]
            return np.concatenate([x0 * cos - x1 * sin, x0 * sin + x1 * cos], axis=-1)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    def attention(self, i, a, pos):
        w, b, T = self.w, f"blk.{i}.", a.shape[0]
        hd = self.head_dim
        q, k, v = (self.mm(a, b + n) for n in ("attn_q.weight", "attn_k.weight", "attn_v.weight"))
        if b + "attn_q.bias" in w:
            q, k, v = q + w[b + "attn_q.bias"], k + w[b + "attn_k.bias"], v + w[b + "attn_v.bias"]
        q = q.reshape(T, self.n_head, hd)
        k = k.reshape(T, self.n_head_kv, hd)
        v = v.reshape(T, self.n_head_kv, hd)
        if b + "attn_q_norm.weight" in w:
            q = self.rmsnorm(q, w[b + "attn_q_norm.weight"])
            k = self.rmsnorm(k, w[b + "attn_k_norm.weight"])
        q, k = self.rope(q, pos), self.rope(k, pos)
        if self.int8:
            k, v = k.astype(np.float16).astype(np.float64), v.astype(np.float16).astype(np.float64)
        group = self.n_head // self.n_head_kv
        kx = np.repeat(k, group, axis=1)  # kv head j // group for query head j
        vx = np.repeat(v, group, axis=1)
        s = np.einsum("thd,shd->hts", q, kx) / np.sqrt(hd)
        s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        o = np.einsum("hts,shd->thd", p, vx).reshape(T, self.n_head * hd)
        return self.mm(o, b + "attn_output.weight")

    def ffn(self, i, f):
        w, b = self.w, f"blk.{i}."
        if not self.n_expert:
            g = self.mm(f, b + "ffn_gate.weight")
            u = self.mm(f, b + "ffn_up.weight")
            return self.mm(silu(g) * u, b + "ffn_down.weight")
        logits = self.mm(f, b + "ffn_gate_inp.weight")  # (T, n_expert)
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        k = self.n_expert_used
        order = np.argsort(-logits, axis=-1, kind="stable")
        ranked = np.take_along_axis(logits, order, axis=-1)
        self.router_margin = min(self.router_margin, float(np.min(ranked[:, k - 1] - ranked[:, k])))
        sel = order[:, :k]
        weights = np.take_along_axis(p, sel, axis=-1)
        weights /= weights.sum(axis=-1, keepdims=True)
        out = np.zeros_like(f)
        for e in range(self.n_expert):
            rows, slot = np.nonzero(sel == e)  # the tokens that chose expert e
            x = f[rows]
            g = self.mm(x, b + "ffn_gate_exps.weight", e)
            u = self.mm(x, b + "ffn_up_exps.weight", e)
            out[rows] += weights[rows, slot][:, None] * self.mm(silu(g) * u, b + "ffn_down_exps.weight", e)
        return out

    def forward(self, tokens):
        """Logits at every position of tokens (causal: position t sees tokens[:t + 1])."""
        tokens = np.asarray(tokens)
        self.router_margin = np.inf
        pos = np.arange(len(tokens), dtype=np.float64)
        h = self.w["token_embd.weight"][tokens]
        for i in range(self.n_layer):
            h = h + self.attention(i, self.rmsnorm(h, self.w[f"blk.{i}.attn_norm.weight"]), pos)
            h = h + self.ffn(i, self.rmsnorm(h, self.w[f"blk.{i}.ffn_norm.weight"]))
        return self.mm(self.rmsnorm(h, self.w["output_norm.weight"]), self.lm_head)

    def logits_rows(self, tokens, n_prompt):
        """hk-run's --logits rows: the prompt's last position, then each decode step."""
        return self.forward(tokens)[n_prompt - 1:]

    def greedy(self, prompt, n):
        """numpy's greedy continuation of prompt: n tokens."""
        seq = list(prompt)
        for _ in range(n):
            seq.append(int(np.argmax(self.forward(seq)[-1])))
        return seq[len(prompt):]


def silu(x):
    return x / (1.0 + np.exp(-x))


def q8_1(x):
    """x with each run of 32 values rounded as a Q8_1 block holds them."""
    b = x.reshape(-1, 32)
    d = (np.abs(b).max(axis=1, keepdims=True) / 127).astype(np.float16).astype(np.float64)
    q = np.clip(np.rint(b / np.where(d == 0, 1, d)), -127, 127)
    return (q * d).reshape(x.shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--prompt-len", type=int, required=True)
    ap.add_argument("--int8", action="store_true", help="the int8 path's model")
    a = ap.parse_args()
    m = Model(a.model, a.int8)
    tokens = [int(t) for t in a.tokens.split(",")]
    rows = m.logits_rows(tokens, a.prompt_len)
    for i, row in enumerate(rows):
        top = np.argsort(-row)[:2]
        print(f"row {i}: argmax {top[0]} margin {row[top[0]] - row[top[1]]:.4f} "
              f"max|logit| {np.abs(row).max():.3f} std {row.std():.3f}")
    if m.n_expert:
        print(f"smallest router margin {m.router_margin:.4f}")


if __name__ == "__main__":
    main()
