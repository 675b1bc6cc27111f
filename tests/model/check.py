#!/usr/bin/env python3
"""ctest's model test: hk-run's logits against numpy's on tiny random models, and hk-run's refusals.

usage: check.py --hk-run PATH --out DIR [--arch A ...] [--timeout SECONDS]
       check.py --int8-model --out DIR [--arch A ...]    forward.py's int8 model against the exact pass
       check.py --find-draws --out DIR                   picks the draws (below)

For each model (make_model.py: llama all Q8_0/F16, llama of K-quants with an F32 projection, qwen2,
qwen3, qwen3moe; --arch picks some), in DIR:
  1. the numpy reference checks itself: forward.py against stepwise.py's token-by-token form
  2. teacher forcing: a prompt of N_PROMPT ids as one batch, then N_DECODE ids one at a time, on
     each activation path
       hk-run MODEL --tokens IDS --prompt-len N_PROMPT --logits FILE --activations int8|f32
     every row of FILE (the prompt's last position, each decode step) against numpy's exact pass:
     cosine >= COS_MIN and max|diff| / max|ref| <= REL_MAX on the f32 path (hk_matvec, hk_gemm_f16:
     only f16 rounding of K, V and the GEMM's x), REL_MAX_INT8 on the int8 path (Q8_1 activations,
     the int8 kernels). The int8 path's rounding is the engine's own, not an error of it, and on
     these random models it alone reaches 3.7e-2 of max|ref|: forward.py's model of it
     (int8=True: each quantized matrix's input rounded to Q8_1 as ggml rounds it, K and V to f16;
     --int8-model prints it against the exact pass) is that far from the exact pass, and no model
     of the rounding tracks it closer, since each rounding that goes the other way near a half
     step moves later layers' inputs by as much as the rounding itself. So the f32 path holds the
     structure to 1e-2 and the int8 path is held to its own bound. A wrong RoPE pairing or base,
     kv head mapping, missing bias or q/k norm gives cosines of 0.9 down to 0 and max|diff| /
     max|ref| above 0.5.
  3. greedy: numpy's greedy continuation of the prompt (N_GREEDY tokens) fed back the same way
     (prompt + the first N_GREEDY - 1 of them): the rows as in 2, and on both paths row i's
     argmax must be continuation token i, or a token the exact pass puts within GREEDY_CLEAR x
     max|logit| of it (a near tie, which rounding may decide either way)
  4. the step's other forms (hk-run --form, hk-bench --step's) and the RMSNorm's staged form
     (HK_RMSNORM_STAGED=1): the teacher-forced int8 run again under each of FORM_GROUPS, its logits
     file identical byte for byte to the default's (each claims the default's bits)
  5. the first model only: hk-run MODEL --bench --reps 1 runs and prints positive pp512 and tg128
     speeds and the decode step's dispatch and barrier counts
The ids are drawn from a seed per model, draw number DRAW of it: one with at least
GREEDY_MIN_CLEAR greedy steps clear of near ties, GREEDY_MIN_DISTINCT distinct greedy tokens (not
a loop on one token) and, for MoE, every router choice clear
(ROUTER_CLEAR; make_model.py routes by code so that it is: near a tie, rounding may pick another
expert, a jump no tolerance covers). The test checks that they are; check.py --find-draws picks
draws again (numpy only), should the models change.

Then inputs hk-run must refuse with a message and a non-zero exit below 128 (no signal, no
sanitizer report, no hang): a missing tensor, an unsupported architecture, a tensor of an
unsupported type, misshapen tensors, a truncated file, a missing file, more tokens than --ctx,
token ids outside the vocabulary, a prompt longer than the ids; and --ctx equal to the token
count, which it must run. hk-run -n N (greedy decoding) must run too.

hk-run gets HK_RUN_PRELOAD as its LD_PRELOAD (run.sh moves LD_PRELOAD there, away from Python).
Exit 0: all passed; 1: a failure.
"""
import argparse
import math
import os
import re
import struct
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's small matrices gain nothing from threads

import numpy as np  # noqa: E402
from gguf import GGMLQuantizationType as T  # noqa: E402

import forward  # noqa: E402
import make_model  # noqa: E402
import stepwise  # noqa: E402

CASES = [  # name, architecture, make_model --types, seed (of the model and of the ids), draw
    ("llama-q8", "llama", "q8", 101, 220),
    ("llama-kquant", "llama", "mixed", 102, 21),
    ("qwen2", "qwen2", "mixed", 103, 11),
    ("qwen3", "qwen3", "mixed", 104, 166),
    ("qwen3moe", "qwen3moe", "mixed", 105, 58),
]
N_PROMPT, N_DECODE, N_GREEDY = 10, 6, 16
COS_MIN, REL_MAX = 0.999, 1e-2
REL_MAX_INT8 = 5e-2  # the int8 path: Q8_1 rounding alone reaches 3.7e-2 on these models (see above)
GREEDY_CLEAR = 4e-2
GREEDY_MIN_CLEAR = 12    # greedy steps of N_GREEDY that must be clear of near ties
GREEDY_MIN_DISTINCT = 12
ROUTER_CLEAR = 0.2       # the int8 path moves router logits by up to about 0.05
DRAWS = 300              # draws --find-draws tries per model
REFUSAL_TIMEOUT = 120
SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:")


class Checks:
    def __init__(self):
        self.failures = 0
        self.count = 0

    def result(self, ok, what, detail=""):
        self.count += 1
        self.failures += not ok
        print(f"{'PASS' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}")
        return ok


def tail(text, lines=20):
    return "\n".join("    " + line for line in text.strip().splitlines()[-lines:])


class HkRun:
    def __init__(self, path, timeout):
        self.path, self.timeout = path, timeout
        self.env = dict(os.environ)
        preload = self.env.pop("HK_RUN_PRELOAD", "")
        if preload:
            self.env["LD_PRELOAD"] = preload

    def __call__(self, args, timeout=None, env=None):
        """(exit status, output); status None on a timeout, negative for a signal. env: more variables."""
        cmd = [self.path] + [str(a) for a in args]
        print("  $ " + "".join(f"{k}={v} " for k, v in (env or {}).items()) + " ".join(cmd), flush=True)
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**self.env, **(env or {})},
                               timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired as e:
            return None, (e.output or b"").decode(errors="replace")
        return p.returncode, p.stdout.decode(errors="replace")


def read_hklg(path, n_vocab, ids, n_prompt):
    """The rows of an HKLG file, after checking its header against what was asked."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 16 or data[:4] != b"HKLG":
        raise ValueError(f"not an HKLG file (starts {data[:4]!r}, {len(data)} bytes)")
    nv, np_, nd = struct.unpack("<3i", data[4:16])
    if (nv, np_, nd) != (n_vocab, n_prompt, len(ids) - n_prompt):
        raise ValueError(f"header n_vocab {nv}, n_prompt {np_}, n_decode {nd}; "
                         f"want {n_vocab}, {n_prompt}, {len(ids) - n_prompt}")
    rows = 1 + nd
    want = 16 + 4 * len(ids) + 4 * rows * nv
    if len(data) != want:
        raise ValueError(f"{len(data)} bytes, want {want}")
    got_ids = np.frombuffer(data, dtype="<i4", count=len(ids), offset=16)
    if list(got_ids) != list(ids):
        raise ValueError(f"ids {list(got_ids)}, want {list(ids)}")
    logits = np.frombuffer(data, dtype="<f4", count=rows * nv, offset=16 + 4 * len(ids)).reshape(rows, nv)
    if not np.isfinite(logits).all():
        raise ValueError(f"{int((~np.isfinite(logits)).sum())} logits not finite")
    return logits.astype(np.float64)


def compare(checks, label, ref, got, counted=True, rel_max=REL_MAX):
    """Row by row: cosine and max|diff| / max|ref| (counted False: printed, not a check)."""
    ok = True
    for i, (r, g) in enumerate(zip(ref, got)):
        cos = float(r @ g / (np.linalg.norm(r) * np.linalg.norm(g)))
        rel = float(np.abs(r - g).max() / np.abs(r).max())
        row_ok = cos >= COS_MIN and rel <= rel_max
        ok &= row_ok
        print(f"    row {i:2d}: cos {cos:.6f}  max|diff|/max|ref| {rel:.2e}  argmax ref {int(np.argmax(r))} "
              f"hk {int(np.argmax(g))}{'' if row_ok else '  <-- off'}")
    if not counted:
        print(f"     {label}: {len(ref)} rows")
        return ok
    return checks.result(ok, f"{label}: {len(ref)} rows within cos >= {COS_MIN}, max|diff|/max|ref| <= {rel_max}")


def clear_rows(rows):
    top2 = -np.sort(-rows, axis=1)[:, :2]
    return top2[:, 0] - top2[:, 1] > GREEDY_CLEAR * np.abs(rows).max(axis=1)


def draw_ids(m, seed, draw):
    """Prompt, decode ids and numpy's greedy continuation of draw `draw`, the number of clear
    greedy steps and the smallest router margin (inf without experts; the greedy continuation is
    None where the decode ids already have a router choice near a tie)."""
    rng = np.random.default_rng([seed, draw])
    prompt = [int(t) for t in rng.integers(0, m.n_vocab, N_PROMPT)]
    decode = [int(t) for t in rng.integers(0, m.n_vocab, N_DECODE)]
    m.forward(prompt + decode)
    router = m.router_margin
    if router < ROUTER_CLEAR:
        return prompt, decode, None, 0, router
    greedy = m.greedy(prompt, N_GREEDY)
    n_clear = int(clear_rows(m.logits_rows(prompt + greedy[:-1], N_PROMPT)).sum())
    return prompt, decode, greedy, n_clear, min(router, m.router_margin)


def usable(greedy, router):
    return router >= ROUTER_CLEAR and len(set(greedy)) >= GREEDY_MIN_DISTINCT


def find_draws(out):
    """Each model's draw with the most clear greedy steps (numpy only)."""
    for name, arch, types, seed, _ in CASES:
        path = os.path.join(out, name + ".gguf")
        make_model.build(path, arch, seed, types)
        m = forward.Model(path)
        best = (-1, None)
        for draw in range(DRAWS):
            _, _, greedy, n_clear, router = draw_ids(m, seed, draw)
            if usable(greedy, router) and n_clear > best[0]:
                best = (n_clear, draw)
                if n_clear == N_GREEDY:
                    break
        print(f"{name}: draw {best[1]}, {best[0]} of {N_GREEDY} greedy steps clear", flush=True)


def check_model(checks, hk, out, name, arch, types, seed, draw):
    """hk None: forward.py's int8 model in place of hk-run."""
    print(f"== {name}: make_model.py --arch {arch} --types {types} --seed {seed}", flush=True)
    path = os.path.join(out, name + ".gguf")
    make_model.build(path, arch, seed, types)
    m = forward.Model(path)
    prompt, decode, greedy, n_clear, router = draw_ids(m, seed, draw)
    ok = router >= ROUTER_CLEAR and usable(greedy, router) and n_clear >= GREEDY_MIN_CLEAR
    if not checks.result(ok, f"{name}: numpy reference ids of draw {draw}",
                         f"{n_clear} of {N_GREEDY} greedy steps clear, {len(set(greedy or []))} distinct tokens" +
                         (f", smallest router margin {router:.2f}" if m.n_expert else "") +
                         ("" if ok else " (check.py --find-draws)")):
        return
    diff = stepwise.agree(m, prompt + decode, N_PROMPT)
    checks.result(diff < 1e-9, f"{name}: forward.py and stepwise.py agree", f"max|diff|/max|logit| {diff:.1e}")

    int8 = forward.Model(path, int8=True) if hk is None else None

    def run_logits(label, ids):
        """hk-run's rows for each activation path, with the exact pass's: {path: (ref, got)}"""
        exact = m.logits_rows(ids, N_PROMPT)
        if hk is None:
            rounded = int8.logits_rows(ids, N_PROMPT)
            compare(checks, f"{name} {label} (int8 model against the exact one, for sizing)", exact, rounded,
                    counted=False)
            return {"int8": (exact, rounded)}
        rows = {}
        for act, rel_max in (("int8", REL_MAX_INT8), ("f32", REL_MAX)):
            file = os.path.join(out, f"{name}-{label}-{act}.hklg")
            if os.path.exists(file):
                os.remove(file)
            rc, text = hk([path, "--tokens", ",".join(map(str, ids)), "--prompt-len", N_PROMPT, "--logits", file,
                           "--activations", act])
            if rc != 0 or SANITIZER.search(text):
                checks.result(False, f"{name} {label} {act}: hk-run",
                              ("timed out" if rc is None else f"exit {rc}") + "\n" + tail(text))
                continue
            try:
                got = read_hklg(file, m.n_vocab, ids, N_PROMPT)
            except (OSError, ValueError) as e:
                checks.result(False, f"{name} {label} {act}: {file}", str(e))
                continue
            compare(checks, f"{name} {label}, {act} activations", exact, got, rel_max=rel_max)
            rows[act] = (exact, got)
        return rows

    run_logits("teacher-forced", prompt + decode)
    if hk is not None:
        check_forms(checks, hk, out, name, path, prompt + decode)
    for act, (ref, got) in run_logits("greedy", prompt + greedy[:-1]).items():
        wrong, ties = [], 0
        for i, (r, h) in enumerate(zip(ref, np.argmax(got, axis=1))):
            if h != greedy[i]:
                tie = r[greedy[i]] - r[h] <= GREEDY_CLEAR * np.abs(r).max()
                ties += tie
                if not tie:
                    wrong.append(f"step {i}: hk {h}, numpy {greedy[i]} ({r[greedy[i]] - r[h]:.3f} above it)")
        checks.result(not wrong, f"{name} greedy, {act} activations: the argmax is numpy's next token at each of "
                      f"{N_GREEDY} steps", f"{ties} near tie(s) decided the other way" if ties and not wrong else
                      ", ".join(wrong))
    return m, path, prompt


# forms that take effect together (f32x turns the tail off; the quantizer apart turns the ranking
# off), and the RMSNorm's staged form (a hook), each of which keeps the bits
FORM_GROUPS = (("f32x", {}), ("attn-q8_1,glu-q8_1,qk-norm,moe-glu-ranked,norm-tail", {}), ("moe-glu-quantize,rope-apart,quant-in-matvec", {}),
               (None, {"HK_RMSNORM_STAGED": "1"}))


def check_forms(checks, hk, out, name, path, ids):
    """the teacher-forced int8 run under each form group: the default's logits, byte for byte"""
    base = os.path.join(out, f"{name}-teacher-forced-int8.hklg")
    if not os.path.exists(base):
        return
    with open(base, "rb") as f:
        want = f.read()
    for forms, env in FORM_GROUPS:
        file = os.path.join(out, f"{name}-forms.hklg")
        if os.path.exists(file):
            os.remove(file)
        what = f"--form {forms}" if forms else " ".join(f"{k}={v}" for k, v in env.items())
        rc, text = hk([path, "--tokens", ",".join(map(str, ids)), "--prompt-len", N_PROMPT, "--logits", file,
                       "--activations", "int8"] + (["--form", forms] if forms else []), env=env)
        if rc != 0 or SANITIZER.search(text):
            checks.result(False, f"{name} {what}: hk-run", ("timed out" if rc is None else f"exit {rc}") +
                          "\n" + tail(text))
            continue
        with open(file, "rb") as f:
            got = f.read()
        differ = sum(a != b for a, b in zip(want, got)) + abs(len(want) - len(got))
        checks.result(differ == 0, f"{name} {what}: the default's logits, byte for byte",
                      f"{differ} of {len(want)} bytes differ")


def check_bench(checks, hk, path):
    """hk-run --bench (one repetition): pp512 and tg128 rows of positive speeds and the step's line."""
    rc, text = hk([path, "--bench", "--reps", "1"])
    rows = {m.group(1): [float(v) for v in m.group(2).split()]
            for m in re.finditer(r"^(pp512|tg128)\s+([0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+)", text, re.MULTILINE)}
    fine = (rc == 0 and not SANITIZER.search(text) and set(rows) == {"pp512", "tg128"} and
            all(v > 0 and math.isfinite(v) for r in rows.values() for v in r) and
            re.search(r"^decode step: [0-9]+ dispatches and [0-9]+ barriers per token", text, re.MULTILINE))
    checks.result(bool(fine), f"hk-run --bench on {os.path.basename(path)}: pp512 and tg128 speeds, the step's line",
                  "" if fine else ("timed out" if rc is None else f"exit {rc}") + "\n" + tail(text))


def refused(checks, hk, what, args, pattern):
    """hk-run ARGS must exit non-zero below 128 with PATTERN (a regex, any case) in its output."""
    rc, text = hk(args, REFUSAL_TIMEOUT)
    if rc is None:
        return checks.result(False, f"refuses {what}", f"no answer within {REFUSAL_TIMEOUT} s")
    problem = ("exit 0: accepted" if rc == 0 else
               f"killed by signal {-rc}" if rc < 0 else
               f"exit {rc}: a crash or signal" if rc >= 128 else
               "a sanitizer report" if SANITIZER.search(text) else
               f"no message matching /{pattern}/" if not re.search(pattern, text, re.IGNORECASE) else "")
    first = text.strip().splitlines()[0] if text.strip() else ""
    return checks.result(not problem, f"refuses {what}", f"exit {rc}: {first}" if not problem else problem + "\n" + tail(text))


def check_refusals(checks, hk, out, archs):
    print("== refusals", flush=True)
    base = ("llama", 201, "q8")

    def bad_model(file, edit=None, write_arch=None, arch=base[0], seed=base[1], types=base[2]):
        path = os.path.join(out, file)
        make_model.build(path, arch, seed, types, edit=edit, write_arch=write_arch)
        return path

    def drop(name):
        return lambda specs: [s for s in specs if s.name != name]

    def change(name, **kw):
        def edit(specs):
            for s in specs:
                if s.name == name:
                    s.__dict__.update(kw)
            return specs
        return edit

    ids = "1,2,3,4,5,6"
    args = lambda path: [path, "--tokens", ids, "--prompt-len", 3, "--logits", os.path.join(out, "refused.hklg")]  # noqa: E731
    refused(checks, hk, "a model missing a tensor (blk.1.ffn_down.weight)",
            args(bad_model("bad-missing.gguf", drop("blk.1.ffn_down.weight"))), r"blk\.1\.ffn_down\.weight")
    refused(checks, hk, "an unsupported architecture (gpt2)",
            args(bad_model("bad-arch.gguf", write_arch="gpt2")), r"gpt2")
    refused(checks, hk, "a tensor of an unsupported type (blk.0.attn_q.weight as Q4_0)",
            args(bad_model("bad-type.gguf", change("blk.0.attn_q.weight", qtype=T.Q4_0))), r"blk\.0\.attn_q\.weight")
    refused(checks, hk, "a misshapen tensor (blk.0.attn_k.weight of 3 kv heads' rows)",
            args(bad_model("bad-shape.gguf", change("blk.0.attn_k.weight", shape=(192, 256)))), r"blk\.0\.attn_k\.weight")
    refused(checks, hk, "a misshapen tensor (output.weight of one row too few)",
            args(bad_model("bad-vocab.gguf", change("output.weight", shape=(1000, 256)))), r"output\.weight")
    if "qwen3moe" in archs:
        refused(checks, hk, "a misshapen expert bank (blk.1.ffn_up_exps.weight of 7 experts)",
                args(bad_model("bad-experts.gguf", change("blk.1.ffn_up_exps.weight", shape=(7, 256, 256)),
                               arch="qwen3moe", types="mixed")), r"blk\.1\.ffn_up_exps\.weight")
    good = bad_model("good.gguf")
    with open(good, "rb") as f:
        data = f.read()
    truncated = os.path.join(out, "bad-truncated.gguf")
    with open(truncated, "wb") as f:
        f.write(data[:len(data) - 4096])  # inside the last tensor's bytes
    refused(checks, hk, "a truncated file", args(truncated), r"bad-truncated\.gguf|truncat|past the|end of")
    missing = os.path.join(out, "bad-none.gguf")
    if os.path.exists(missing):
        os.remove(missing)
    refused(checks, hk, "a missing file", args(missing), r"bad-none\.gguf")

    m = forward.Model(good)
    twelve = ",".join(str(t) for t in range(100, 112))
    logits = os.path.join(out, "ctx.hklg")
    refused(checks, hk, "more tokens than --ctx (12 ids, --ctx 8)",
            [good, "--tokens", twelve, "--prompt-len", 4, "--logits", logits, "--ctx", 8], r"ctx|context")
    for bad_id in (m.n_vocab, -1):
        refused(checks, hk, f"a token id outside the vocabulary ({bad_id})",
                [good, "--tokens", f"1,2,{bad_id},4", "--prompt-len", 2, "--logits", logits], r"token|vocab|range")
    refused(checks, hk, "a prompt longer than the ids (--prompt-len 7 of 6)",
            [good, "--tokens", ids, "--prompt-len", 7, "--logits", logits], r"prompt")
    refused(checks, hk, "a form that is none of the step's (--form norm-tail,nosuch)",
            [good, "--tokens", ids, "--prompt-len", 3, "--logits", logits, "--form", "norm-tail,nosuch"],
            r"--form: 'nosuch' is not one of")

    # the boundary: as many tokens as --ctx runs
    if os.path.exists(logits):
        os.remove(logits)
    rc, text = hk([good, "--tokens", twelve, "--prompt-len", 4, "--logits", logits, "--ctx", 12, "--activations", "f32"])
    if checks.result(rc == 0 and not SANITIZER.search(text), "runs 12 ids with --ctx 12", f"exit {rc}\n" + tail(text)):
        try:
            got = read_hklg(logits, m.n_vocab, list(range(100, 112)), 4)
            compare(checks, "--ctx 12", m.logits_rows(list(range(100, 112)), 4), got)
        except (OSError, ValueError) as e:
            checks.result(False, f"--ctx 12: {logits}", str(e))
    # greedy decoding as a user runs it
    rc, text = hk([good, "--tokens", "1,2,3", "-n", N_GREEDY])
    checks.result(rc == 0 and bool(text.strip()) and not SANITIZER.search(text), f"runs -n {N_GREEDY}",
                  f"exit {rc}\n" + tail(text, 6))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hk-run")
    ap.add_argument("--find-draws", action="store_true", help="print a clear draw for each model, and exit")
    ap.add_argument("--int8-model", action="store_true", help="check forward.py's int8 model, not hk-run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", action="append", choices=make_model.ARCHS, help="only these (repeatable)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per hk-run run (default 600)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.find_draws:
        find_draws(a.out)
        return
    if not a.hk_run and not a.int8_model:
        ap.error("--hk-run is required")
    archs = a.arch or list(make_model.ARCHS)
    hk = None if a.int8_model else HkRun(a.hk_run, a.timeout)
    checks = Checks()
    benched = False
    for name, arch, types, seed, draw in CASES:
        if arch in archs:
            done = check_model(checks, hk, a.out, name, arch, types, seed, draw)
            if hk and done and not benched:
                check_bench(checks, hk, done[1])
                benched = True
    if hk:
        check_refusals(checks, hk, a.out, archs)
    print(f"model: {checks.count} check(s), {checks.failures} failure(s)")
    sys.exit(1 if checks.failures else 0)


if __name__ == "__main__":
    main()
