#!/usr/bin/env python3
"""A second, independent form of forward.py's math, to check the reference itself.

forward.py runs the whole sequence at once (a causal mask, cos/sin arrays, np.repeat for the kv
heads, vectorised over tokens); this one runs token by token as an engine does: a KV cache,
RoPE as a complex rotation of each pair, attention and the query-to-kv-head mapping as plain loops,
the experts picked by sorting a Python list, the RoPE pairing decided from the architecture here
too. Only the weights and hyperparameters (forward.Model's) and the RMSNorm formula are shared. hand_checks() compares RoPE and attention with values worked
out by hand.

usage: stepwise.py MODEL.gguf...   runs the hand checks, then compares both forms on each model
"""
import cmath
import math
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import numpy as np

import forward


def rope_complex(v, pos, base, neox, freqs=None):
    """Rotates each pair of v (d,) by pos * base^(-2i/d) / freqs[i]."""
    d = len(v)
    half = d // 2
    out = np.empty(d)
    for i in range(half):
        angle = pos / base ** (2 * i / d)
        if freqs is not None:
            angle /= freqs[i]
        a, b = (i, i + half) if neox else (2 * i, 2 * i + 1)
        z = complex(v[a], v[b]) * cmath.exp(1j * angle)
        out[a], out[b] = z.real, z.imag
    return out


def softmax(xs):
    top = max(xs)
    e = [math.exp(x - top) for x in xs]
    s = sum(e)
    return [x / s for x in e]


def stepwise_rows(m, tokens, n_prompt):
    """hk-run's --logits rows for tokens, one token at a time."""
    w, hd = m.w, m.head_dim
    freqs = w.get("rope_freqs.weight")
    per_kv = m.n_head // m.n_head_kv
    neox = m.arch in ("qwen2", "qwen3", "qwen3moe")  # llama.cpp's LLAMA_ROPE_TYPE_NEOX archs
    cache = [([], []) for _ in range(m.n_layer)]
    rows = []
    for t, tok in enumerate(tokens):
        x = w["token_embd.weight"][tok].copy()
        for i in range(m.n_layer):
            b = f"blk.{i}."
            a = m.rmsnorm(x, w[b + "attn_norm.weight"])
            q, k, v = (w[b + n + ".weight"] @ a for n in ("attn_q", "attn_k", "attn_v"))
            if b + "attn_q.bias" in w:
                q, k, v = q + w[b + "attn_q.bias"], k + w[b + "attn_k.bias"], v + w[b + "attn_v.bias"]
            heads_q = [q[h * hd:(h + 1) * hd] for h in range(m.n_head)]
            heads_k = [k[h * hd:(h + 1) * hd] for h in range(m.n_head_kv)]
            heads_v = [v[h * hd:(h + 1) * hd] for h in range(m.n_head_kv)]
            if b + "attn_q_norm.weight" in w:
                heads_q = [m.rmsnorm(h, w[b + "attn_q_norm.weight"]) for h in heads_q]
                heads_k = [m.rmsnorm(h, w[b + "attn_k_norm.weight"]) for h in heads_k]
            heads_q = [rope_complex(h, t, m.rope_base, neox, freqs) for h in heads_q]
            heads_k = [rope_complex(h, t, m.rope_base, neox, freqs) for h in heads_k]
            keys, values = cache[i]
            keys.append(heads_k)
            values.append(heads_v)
            out = []
            for h in range(m.n_head):
                g = h // per_kv
                p = softmax([float(heads_q[h] @ keys[s][g]) / math.sqrt(hd) for s in range(t + 1)])
                out.append(sum(p[s] * values[s][g] for s in range(t + 1)))
            x = x + w[b + "attn_output.weight"] @ np.concatenate(out)
            f = m.rmsnorm(x, w[b + "ffn_norm.weight"])
            if m.n_expert:
                logits = list(w[b + "ffn_gate_inp.weight"] @ f)
                probs = softmax(logits)
                chosen = sorted(range(m.n_expert), key=lambda e: -logits[e])[:m.n_expert_used]
                total = sum(probs[e] for e in chosen)
                for e in chosen:
                    g = w[b + "ffn_gate_exps.weight"][e] @ f
                    u = w[b + "ffn_up_exps.weight"][e] @ f
                    x = x + probs[e] / total * (w[b + "ffn_down_exps.weight"][e] @ (g / (1 + np.exp(-g)) * u))
            else:
                g = w[b + "ffn_gate.weight"] @ f
                u = w[b + "ffn_up.weight"] @ f
                x = x + w[b + "ffn_down.weight"] @ (g / (1 + np.exp(-g)) * u)
        if t >= n_prompt - 1:
            rows.append(w[m.lm_head] @ m.rmsnorm(x, w["output_norm.weight"]))
    return np.array(rows)


def agree(m, tokens, n_prompt):
    """The largest difference between forward.py's rows and these, relative to the largest logit."""
    a = m.logits_rows(tokens, n_prompt)
    b = stepwise_rows(m, tokens, n_prompt)
    return float(np.abs(a - b).max() / np.abs(a).max())


class _Bare(forward.Model):
    """forward.Model's math with hand-set weights and hyperparameters (no file)."""
    def __init__(self, **kw):
        self.int8, self.quantized = False, set()
        self.__dict__.update(kw)


def hand_checks():
    """RoPE and attention on values worked out by hand; returns a list of failures."""
    bad = []
    x = np.array([[[1.0, 0.0, 0.0, 1.0]]])  # one position, one head, d = 4
    pos = np.array([1.0])
    # base 10000, d 4: angles pos * 1 and pos * 0.01
    c1, s1, c2, s2 = math.cos(1), math.sin(1), math.cos(0.01), math.sin(0.01)
    want = {False: [c1, s1, -s2, c2],   # pairs (0, 1) and (2, 3)
            True: [c1, -s2, s1, c2]}    # pairs (0, 2) and (1, 3)
    for neox in (False, True):
        m = _Bare(rope_base=10000.0, neox=neox, w={})
        got = m.rope(x, pos)[0, 0]
        if not np.allclose(got, want[neox], atol=1e-15):
            bad.append(f"rope neox={neox}: {got} != {want[neox]}")
        got = rope_complex(x[0, 0], 1.0, 10000.0, neox)
        if not np.allclose(got, want[neox], atol=1e-15):
            bad.append(f"rope_complex neox={neox}: {got} != {want[neox]}")
        m.w = {"rope_freqs.weight": np.array([1.0, 0.5])}  # the second pair turns twice as fast
        got = m.rope(x, pos)[0, 0]
        want_f = [c1, s1, -math.sin(0.02), math.cos(0.02)] if not neox else [c1, -math.sin(0.02), s1, math.cos(0.02)]
        if not np.allclose(got, want_f, atol=1e-15):
            bad.append(f"rope with rope_freqs neox={neox}: {got} != {want_f}")
    # attention: d 2, 4 query heads on 2 kv heads (query heads 0, 1 on kv head 0; 2, 3 on kv head 1),
    # q and k the input itself, kv head 1's v three times kv head 0's. Inputs a0 = (1, 0) at
    # position 0 and a1 = (0, 2) at position 1, where RoPE turns q and k by 1 rad:
    # q1 = k1 = (-2 sin 1, 2 cos 1), k0 = a0. Position 0 sees only v0; position 1 mixes v0 and v1
    # by softmax((q1.k0, q1.k1) / sqrt(2)) = softmax((-2 sin 1, 4) / sqrt(2)).
    eye = np.eye(2)
    m = _Bare(rope_base=10000.0, neox=True, head_dim=2, n_head=4, n_head_kv=2,
              w={"blk.0.attn_q.weight": np.vstack([eye] * 4), "blk.0.attn_k.weight": np.vstack([eye] * 2),
                 "blk.0.attn_v.weight": np.vstack([eye, 3 * eye]), "blk.0.attn_output.weight": np.eye(8)})
    a = np.array([[1.0, 0.0], [0.0, 2.0]])
    p = np.exp(np.array([-2 * math.sin(1), 4.0]) / math.sqrt(2))
    p /= p.sum()
    mix = p[0] * a[0] + p[1] * a[1]
    want = np.array([np.concatenate([a[0], a[0], 3 * a[0], 3 * a[0]]),
                     np.concatenate([mix, mix, 3 * mix, 3 * mix])])
    for neox in (False, True):  # with d 2 both pairings are the pair (0, 1)
        m.neox = neox
        got = m.attention(0, a, np.array([0.0, 1.0]))
        if not np.allclose(got, want, atol=1e-15):
            bad.append(f"attention neox={neox}: {got} != {want}")
    return bad


def main():
    bad = hand_checks()
    for b in bad:
        print("FAIL", b)
    if not bad:
        print("PASS hand checks: RoPE (both pairings, rope_freqs), attention")
    rng = np.random.default_rng(1)
    for path in sys.argv[1:]:
        m = forward.Model(path)
        tokens = [int(t) for t in rng.integers(0, m.n_vocab, size=14)]
        d = agree(m, tokens, 8)
        ok = d < 1e-10
        bad += [] if ok else [path]
        print(f"{'PASS' if ok else 'FAIL'} {path}: forward.py vs stepwise, max|diff| / max|logit| {d:.2e}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
