"""Random GGUF models of real architectures (llama, qwen2, qwen3, qwen3moe), written with gguf-py.

One writer for the tiny models of the model test (tests/model/make_model.py) and the full-size ones
for GPUs (tools/make-synthetic-model.py): metadata keys and tensor names exactly as llama.cpp's
convert script and llama-quantize write them, weights as random but valid blocks of each type.

Weights have sane magnitudes so activations neither vanish nor explode through the layers: a
matrix with k inputs gets elements of standard deviation GAIN[role] / sqrt(k) (each output then
has about GAIN times its input's scale); norms are near 1. K-quant blocks are made by hand (gguf-py
dequantizes them but cannot quantize to them): uniformly random quants, per-sub-block scales around
the size the target deviation needs, Q4_K's and Q5_K's mins chosen so each sub-block is centred on
zero, f16 super-block scales kept out of the subnormal range. Q8_0 and the other types gguf-py can
quantize are quantized by gguf-py from normal f32 rows. Vectorised: a 1.5 GB file is generated in
seconds, and tensors are generated and streamed to the file one at a time.
"""
from dataclasses import dataclass
import itertools
from typing import Callable, Optional

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize

QK_K = 256

# output scale per input scale of each matrix role (see the module's docstring)
GAIN = {
    "token_embd": 1.6, "output": 1.6,
    "attn_q": 1.3, "attn_k": 1.3, "attn_v": 1.0, "attn_output": 1.0,
    "ffn_gate": 1.0, "ffn_up": 1.0, "ffn_down": 1.0,
    "ffn_gate_inp": 1.0, "ffn_gate_exps": 1.0, "ffn_up_exps": 1.0, "ffn_down_exps": 1.0,
}
BIAS_SIGMA = 0.3
D_MIN = 2.0 ** -13  # the smallest f16 super-block scale written: well above f16's subnormals


@dataclass
class Config:
    """A model's hyperparameters, as llama.cpp reads them from the GGUF metadata."""
    arch: str                 # llama, qwen2, qwen3, qwen3moe
    name: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_ctx: int = 4096
    rope_base: float = 10000.0
    eps: float = 1e-5
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    tied: bool = False        # no output.weight: the lm head is token_embd
    key_length: bool = False  # write attention.key_length/value_length (configs with a head_dim)
    tokenizer: str = "llama"  # "llama" (SentencePiece) or "gpt2" (byte-level BPE)
    tokenizer_pre: str = "default"
    rope_freqs: bool = False  # a rope_freqs.weight tensor (Llama 3.1's frequency factors)
    file_type: int = gguf.LlamaFileType.MOSTLY_Q4_K_M


@dataclass
class Spec:
    """One tensor: name, shape in numpy's order (ggml's ne reversed: rows x k, experts x rows x k),
    type, and how its values are drawn: ("normal", sigma), ("uniform", lo, hi); then, for types
    quantized from f32 values (not the K-quants), edit_values(values) -> values, if given; and the
    rows in zero_rows (of every expert) zeroed."""
    name: str
    shape: tuple
    qtype: T
    init: tuple
    edit_values: Optional[Callable] = None
    zero_rows: tuple = ()


def plan(cfg, type_of):
    """The tensors of cfg's architecture, in the order llama.cpp's files hold them.
    type_of(role, layer) gives each matrix's type (layer None for token_embd and output); norms,
    biases and rope_freqs are F32."""
    def mat(name, role, layer, shape):
        k = shape[-1]
        return Spec(name, shape, type_of(role, layer), ("normal", GAIN[role] / np.sqrt(k)))

    def vec(name, n, init=("uniform", 0.8, 1.2)):
        return Spec(name, (n,), T.F32, init)

    e, hd = cfg.n_embd, cfg.head_dim
    q_dim, kv_dim = cfg.n_head * hd, cfg.n_head_kv * hd
    specs = [mat("token_embd.weight", "token_embd", None, (cfg.n_vocab, e))]
    if cfg.rope_freqs:
        specs.append(vec("rope_freqs.weight", hd // 2, ("uniform", 1.0, 8.0)))
    for i in range(cfg.n_layer):
        b = f"blk.{i}."
        specs.append(vec(b + "attn_norm.weight", e))
        specs.append(mat(b + "attn_q.weight", "attn_q", i, (q_dim, e)))
        specs.append(mat(b + "attn_k.weight", "attn_k", i, (kv_dim, e)))
        specs.append(mat(b + "attn_v.weight", "attn_v", i, (kv_dim, e)))
        if cfg.arch == "qwen2":
            specs.append(vec(b + "attn_q.bias", q_dim, ("normal", BIAS_SIGMA)))
            specs.append(vec(b + "attn_k.bias", kv_dim, ("normal", BIAS_SIGMA)))
            specs.append(vec(b + "attn_v.bias", kv_dim, ("normal", BIAS_SIGMA)))
        if cfg.arch in ("qwen3", "qwen3moe"):
            specs.append(vec(b + "attn_q_norm.weight", hd))
            specs.append(vec(b + "attn_k_norm.weight", hd))
        specs.append(mat(b + "attn_output.weight", "attn_output", i, (e, q_dim)))
        specs.append(vec(b + "ffn_norm.weight", e))
        if cfg.n_expert:
            x, f = cfg.n_expert, cfg.n_ff_exp
            specs.append(mat(b + "ffn_gate_inp.weight", "ffn_gate_inp", i, (x, e)))
            specs.append(mat(b + "ffn_gate_exps.weight", "ffn_gate_exps", i, (x, f, e)))
            specs.append(mat(b + "ffn_up_exps.weight", "ffn_up_exps", i, (x, f, e)))
            specs.append(mat(b + "ffn_down_exps.weight", "ffn_down_exps", i, (x, e, f)))
        else:
            specs.append(mat(b + "ffn_gate.weight", "ffn_gate", i, (cfg.n_ff, e)))
            specs.append(mat(b + "ffn_up.weight", "ffn_up", i, (cfg.n_ff, e)))
            specs.append(mat(b + "ffn_down.weight", "ffn_down", i, (e, cfg.n_ff)))
    specs.append(vec("output_norm.weight", e))
    if not cfg.tied:
        specs.append(mat("output.weight", "output", None, (cfg.n_vocab, e)))
    return specs


# ---- weights --------------------------------------------------------------------------------------

def _f16_bytes(x):
    return x.astype(np.float16).view(np.uint8).reshape(-1, 2)


def _scales(rng, n, sigma, q_std, sc_max):
    """Per-block f16 super-block scales d and per-sub-block integer scales (n x 16 draws, the
    caller takes what it needs) with d * sc * q_std about sigma. d is at least D_MIN, so small
    sigmas get small sub-block scales rather than subnormal d."""
    d0 = max(sigma / (q_std * sc_max * 0.6), D_MIN)
    d = (d0 * rng.uniform(0.9, 1.1, size=n)).astype(np.float16)
    target = sigma / (q_std * d.astype(np.float32))[:, None]
    sc = np.clip(np.rint(target * rng.uniform(0.5, 1.5, size=(n, 16))), 1, sc_max)
    return d, sc


def _pack_scale_min_k4(sc, m):
    """Q4_K's and Q5_K's 12 scale bytes from 8 six-bit scales and 8 six-bit mins per block (the
    layout ggml's get_scale_min_k4 reads)."""
    sc = sc.astype(np.uint8)
    m = m.astype(np.uint8)
    out = np.empty((sc.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return out


def _random_bytes(rng, n, width):
    return np.frombuffer(rng.bytes(n * width), dtype=np.uint8).reshape(n, width)


def kquant_blocks(rng, qtype, n, sigma):
    """n random, valid blocks of a K-quant type whose values have standard deviation about sigma
    and mean about zero."""
    if qtype in (T.Q4_K, T.Q5_K):
        levels = 16 if qtype == T.Q4_K else 32
        q_mean, q_std = (levels - 1) / 2, np.sqrt((levels * levels - 1) / 12)
        d, sc = _scales(rng, n, sigma, q_std, 63)
        sc = sc[:, :8]
        # the min dmin * m cancels the mean d * sc * q_mean; dmin = d * 2^j keeps m within 6 bits
        # (j >= 0: dmin stays out of f16's subnormals too)
        ratio = 2.0 ** np.maximum(np.ceil(np.log2(sc.max(axis=1) * q_mean / 63)), 0)
        dmin = d * ratio.astype(np.float16)
        m = np.clip(np.rint(sc * q_mean / ratio[:, None]), 0, 63)
        parts = [_f16_bytes(d), _f16_bytes(dmin), _pack_scale_min_k4(sc, m)]
        if qtype == T.Q5_K:
            parts.append(_random_bytes(rng, n, 32))  # qh: the fifth bit of each quant
        parts.append(_random_bytes(rng, n, 128))     # qs: two four-bit quants a byte
        return np.concatenate(parts, axis=1)
    if qtype == T.Q6_K:
        d, sc = _scales(rng, n, sigma, np.sqrt((64 * 64 - 1) / 12), 127)
        sign = np.where(_random_bytes(rng, n, 16) & 1, -1, 1)
        scales = (sc * sign).astype(np.int8).view(np.uint8)
        return np.concatenate([_random_bytes(rng, n, 192), scales, _f16_bytes(d)], axis=1)  # ql, qh
    raise ValueError(f"no K-quant block maker for {qtype.name}")


def random_tensor(rng, spec):
    """spec's values, as GGUFWriter takes them: f32/f16 arrays, or uint8 blocks of rows x bytes."""
    kind, *a = spec.init
    shape, qtype = spec.shape, spec.qtype
    if qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
        if kind != "normal" or shape[-1] % QK_K or spec.edit_values:
            raise ValueError(f"{spec.name}: {qtype.name} takes normal values, unedited, and k % {QK_K} == 0")
        n = int(np.prod(shape)) // QK_K
        out = kquant_blocks(rng, qtype, n, a[0]).reshape(*shape[:-1], -1)
    else:
        if kind == "uniform":
            values = rng.uniform(a[0], a[1], size=shape).astype(np.float32)
        else:
            values = rng.standard_normal(size=shape, dtype=np.float32) * np.float32(a[0])
        if spec.edit_values:
            values = spec.edit_values(values).astype(np.float32)
        if qtype == T.F32:
            out = values
        elif qtype == T.F16:
            out = values.astype(np.float16)
        else:
            out = quantize(values, qtype)  # Q8_0 and whatever else gguf-py quantizes
    if spec.zero_rows:
        out[..., list(spec.zero_rows), :] = 0  # all-zero bytes: a zero row in every type
    return out


# ---- tokenizers -----------------------------------------------------------------------------------

def _words(first, rest):
    """Distinct strings, shortest first: a character of `first`, then characters of `rest`."""
    for length in itertools.count(1):
        for w in itertools.product(first, *([rest] * (length - 1))):
            yield "".join(w)


def gpt2_byte_chars():
    """GPT-2's printable stand-in for each byte value (bytes_to_unicode)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


LETTERS = "etaoinshrdlcumwfgypbvkjxqz"
SPECIALS = {"llama": ["<unk>", "<s>", "</s>"],
            "qwen": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            "llama-bpe": ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]}


def add_tokenizer(w, cfg):
    """A vocabulary of cfg.n_vocab tokens in the form llama.cpp's convert script writes:
    SentencePiece ("llama": <unk> <s> </s>, the 256 byte tokens, then pieces with U+2581 for a
    space, scores descending) or byte-level BPE ("gpt2": the 256 byte characters, merged pieces
    with their merges, the special tokens last)."""
    n = cfg.n_vocab
    if cfg.tokenizer == "llama":
        tokens = SPECIALS["llama"] + [f"<0x{b:02X}>" for b in range(256)]
        types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
        types += [gguf.TokenType.BYTE] * 256
        words = _words("\u2581" + LETTERS, LETTERS)
        while len(tokens) < n:
            tokens.append(next(words))
            types.append(gguf.TokenType.NORMAL)
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * 259 + [-float(i) for i in range(n - 259)])
        w.add_token_types(types)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        return
    specials = SPECIALS["llama-bpe" if cfg.tokenizer_pre == "llama-bpe" else "qwen"]
    tokens = gpt2_byte_chars()
    merges = []
    words = _words("\u0120" + LETTERS, LETTERS)  # U+0120: GPT-2's stand-in for the space byte
    while len(tokens) < n - len(specials):
        word = next(words)
        if len(word) > 1:
            tokens.append(word)
            merges.append(word[:-1] + " " + word[-1])
    tokens += specials
    types = [gguf.TokenType.NORMAL] * (n - len(specials)) + [gguf.TokenType.CONTROL] * len(specials)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(cfg.tokenizer_pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(n - len(specials))
    w.add_eos_token_id(n - 1)


# ---- the file -------------------------------------------------------------------------------------

def add_metadata(w, cfg):
    """The hyperparameters under the keys llama.cpp's convert script writes for cfg.arch (the
    writer's own prefix: general.architecture names it)."""
    w.add_name(cfg.name)
    w.add_context_length(cfg.n_ctx)
    w.add_embedding_length(cfg.n_embd)
    w.add_block_count(cfg.n_layer)
    w.add_feed_forward_length(cfg.n_ff)
    w.add_head_count(cfg.n_head)
    w.add_head_count_kv(cfg.n_head_kv)
    w.add_rope_freq_base(cfg.rope_base)
    w.add_layer_norm_rms_eps(cfg.eps)
    if cfg.arch == "llama":
        w.add_vocab_size(cfg.n_vocab)
        w.add_rope_dimension_count(cfg.head_dim)
    if cfg.key_length:
        w.add_key_length(cfg.head_dim)
        w.add_value_length(cfg.head_dim)
    if cfg.n_expert:
        w.add_expert_count(cfg.n_expert)
        w.add_expert_used_count(cfg.n_expert_used)
        w.add_expert_feed_forward_length(cfg.n_ff_exp)
    w.add_file_type(int(cfg.file_type))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    add_tokenizer(w, cfg)


def write(path, cfg, specs, rng, arch=None, progress=None):
    """Writes the model: cfg's metadata (under architecture `arch`, default cfg.arch), then specs'
    tensors, each generated just before it is written."""
    w = gguf.GGUFWriter(path, arch or cfg.arch)
    add_metadata(w, cfg)
    for s in specs:
        if s.qtype in (T.F32, T.F16):
            dtype = np.float32 if s.qtype == T.F32 else np.float16
            nbytes = int(np.prod(s.shape)) * np.dtype(dtype).itemsize
            w.add_tensor_info(s.name, s.shape, np.dtype(dtype), nbytes)
        else:
            block, size = gguf.GGML_QUANT_SIZES[s.qtype]
            if s.shape[-1] % block:
                raise ValueError(f"{s.name}: k {s.shape[-1]} is not a multiple of {s.qtype.name}'s {block}")
            byte_shape = (*s.shape[:-1], s.shape[-1] // block * size)
            w.add_tensor_info(s.name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)), raw_dtype=s.qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for s in specs:
        w.write_tensor_data(random_tensor(rng, s))
        if progress:
            progress(s)
    w.close()
