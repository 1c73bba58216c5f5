"""Four per-step levers of the optimizers' hot passes, each as a before/after time ratio with an accuracy check.

Measurement only: nothing under src/ is changed; every "after" is a copy of the library's code inside this
script with the one change applied. BLAS on one thread (the OMP/OPENBLAS/MKL thread variables are set before
numpy is imported, and threadpoolctl limits the pools), clock = the calling thread's CPU time
(``common.CLOCKS``), repetitions interleaved (before, after, before, after, ...), medians reported, the ratio
both as median(before) / median(after) and as the median of the per-repetition (paired) ratios.

Data: synthetic dense Z, Gaussian rows with column scales decaying from 1 to 1e-3 (a real dataset's spread of
feature scales, so the Hessian is ill-conditioned as on real data), scaled and projected into the unit ball
(z / max(1, ||z||)). Shapes :data:`SHAPES`: 30,000 x 123 (a1a-like) and 20,000 x 784 (fashion-mnist-like);
20,000 x 300 is added for the eigendecomposition only. float32 problems are
:meth:`LogisticProblem.with_precision` twins (the claims config runs ``precision: float32``).

1. **Sigmoid** (``sigmoid``). ``scipy.special.expit(-m)`` (dpnewton/loss.py and dpnewton/gram.py, every
   gradient pass) against the tanh form computed in place, sigma(-m) = 0.5 - 0.5 tanh(m/2) (one allocation:
   ``buf = m * -0.5; tanh(buf, out=buf); buf *= 0.5; buf += 0.5``), and expit into a preallocated buffer
   (which separates the allocation from the function). (a) Micro: margin arrays shaped like one block of the
   GEMM pass, (S, block) views of an (S, n) array as ``_gemm_pass`` slices them, S in 1, 8, 64 and block =
   ``row_block(d, GEMM_BLOCK_BYTES, itemsize)``, float64 and float32. (b) Accuracy over m in [-60, 60] and
   normal draws: max absolute and relative error against float64 expit, and from which m the relative error
   exceeds 1e-12 (float64) / 1e-4 (float32), i.e. where the tanh form has rounded sigma(-m) to 0 or to few
   digits. (c) Whole pass: ``margins_and_grads`` of 1 run (blocked gemv pass), 8 and 64 runs (GEMM pass)
   against a copy with the tanh form; the time share of expit in the pass (the expit calls of the pass alone,
   on the same slices) and the gradient's relative change.
2. **float32 eigh** (``eigh``). ``scipy.linalg.eigh(H, driver="evd")`` of the ``clip`` direction
   (``newton_direction.modified_newton_direction``: vecs diag(1/max(vals, lambda)) vecs^T g) in float64
   against the same in float32 (the direction formed in float64 from the cast-up factors); also the ``add``
   direction (``cho_factor``/``cho_solve`` of H + lambda I) in float32, with and without one float64
   refinement step. H = the exact Hessian (1/n) Z^T diag(c) Z at a point w of margins ~ N(0, 4) (the
   double-noise methods eigendecompose the noiseless SOI and noise the direction), g a random unit vector
   (the noisy gradient is noise-dominated), lambda in 1e-4, 1e-3, 1e-2 (the adaptive rule
   cbrt(tr H / (n^2 rho)) gives ~5e-4 to 1e-2 at these n). Accuracy: ||d32 - d64|| / ||d64||. The step share:
   the eigh against the fused ``newton_pass`` in float64 and float32 (the claims config's pass is float32, its
   eigh float64).
3. **DP-GD batch width** (``width``). ``margins_and_grads(W)`` for S = 1, 8, 16, 32, 64, 128 runs (GEMM pass
   from ``GEMM_MIN_RUNS`` = 8), float64 and float32: per-run time relative to S = 8 and S = 16.
4. **Newton pass vs bare SYRK** (``newton``). ``newton_pass(w, "hessian")`` (the fused margins + gradient +
   Hessian pass of dpnewton/gram.py) against a bare ``dsyrk`` over the whole of Z (``ssyrk`` in float32) and a
   SYRK over the same row blocks (``GRAM_BLOCK_BYTES``), no scaling; the pieces of the fused pass (timed per
   block inside an instrumented copy: gemv margins, expit for the gradient, gemv gradient, the Hessian
   coefficient expit(m) expit(-m), its sqrt, the row scaling multiply, the SYRK); and variants: a 4 MiB and a
   256 KiB block, GEMM instead of SYRK, one sigmoid s = sigma(-m) for both the gradient and c = s (1 - s)
   (expit or the tanh form), and the tanh form with either block. Target: within 1.3x of the bare SYRK. Each variant's
   (m, g, H) is checked against the library's (max abs difference over max abs entry).

    python benchmarks/step_levers.py [--quick] [--only sigmoid eigh width newton] [--repeats-scale 1.0]

``--quick`` (under a minute): n / 6 rows, fewer repetitions, results written as ``step_levers_quick.*`` (a smoke
run, not the section). A full run takes ~3-5 minutes on the 2 shared cores (more under load) and writes
``benchmarks/results/step_levers.csv`` (one row per measurement; ``lever`` names the part), ``step_levers.md``
and ``step_levers.env.json``; a hand-written ``step_levers_discussion.md`` is appended to the section.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy import linalg, special  # noqa: E402
from scipy.linalg import blas  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import common  # noqa: E402
from dpnewton.loss import (  # noqa: E402
    FIRST_ORDER_BLOCK_BYTES, GEMM_BLOCK_BYTES, GEMM_MIN_RUNS, GRAM_BLOCK_BYTES, LogisticProblem, row_block)
from dpnewton.margin_functions import hessian_coefficient  # noqa: E402

#: name -> (n, d) of the timed problems (the eigh part adds EIGH_EXTRA)
SHAPES = {"a1a-like": (30000, 123), "fashion-like": (20000, 784)}
EIGH_EXTRA = {"d300": (20000, 300)}
DTYPES = ("float64", "float32")
MICRO_RUNS = (1, 8, 64)
PASS_RUNS = (1, 8, 64)
WIDTHS = (1, 8, 16, 32, 64, 128)
LAMBDAS = (1e-4, 1e-3, 1e-2)
BIG_BLOCK_BYTES = 4 << 20
SMALL_BLOCK_BYTES = 1 << 18
TARGET = 1.3
CLOCK = common.CLOCKS["cpu"]


# ---- data ----------------------------------------------------------------------------------------
def synthetic_problem(n: int, d: int, seed: int) -> LogisticProblem:
    """Gaussian rows, column scales logspace(0, -3), scaled to median norm 1 and projected into the unit ball."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d)) * np.logspace(0, -3, d)
    Z /= np.median(np.linalg.norm(Z, axis=1))
    Z /= np.maximum(1.0, np.linalg.norm(Z, axis=1) * (1 + 1e-12))[:, None]
    return LogisticProblem(Z, name=f"synthetic {n}x{d}")


def point(p: LogisticProblem, seed: int, spread: float = 2.0) -> np.ndarray:
    """A w whose margins Z w have standard deviation ``spread``."""
    w = np.random.default_rng(seed).standard_normal(p.d)
    return w * spread / np.std(p.Z[:2000] @ w)


def stack(p: LogisticProblem, S: int, seed: int) -> np.ndarray:
    return np.stack([point(p, seed + j) for j in range(S)])


# ---- timing --------------------------------------------------------------------------------------
def inner_for(fn, target_s: float = 0.004) -> int:
    """Calls per sample so that one sample lasts about ``target_s`` of CPU time."""
    fn()
    t0 = CLOCK()
    fn()
    return max(1, int(target_s / max(CLOCK() - t0, 1e-7)))


def timed(funcs: dict, repeats: int, target_s: float = 0.004) -> dict[str, np.ndarray]:
    """Seconds per call of every callable, ``repeats`` samples each, interleaved round-robin (as
    common.interleaved), each sample ``inner`` calls of its own (about ``target_s`` of CPU time)."""
    inner = {k: inner_for(f, target_s) for k, f in funcs.items()}
    out = {k: [] for k in funcs}
    for _ in range(repeats):
        for k, f in funcs.items():
            t0 = CLOCK()
            for _ in range(inner[k]):
                f()
            out[k].append((CLOCK() - t0) / inner[k])
    return {k: np.array(v) for k, v in out.items()}


def ratio_fields(t: dict, before: str, after: str) -> dict:
    b, a = t[before], t[after]
    return {"before_ms": 1e3 * float(np.median(b)), "after_ms": 1e3 * float(np.median(a)),
            "ratio": float(np.median(b) / np.median(a)), "paired_ratio": float(np.median(b / a)),
            "repeats": len(b)}


# ---- 1. sigmoid ----------------------------------------------------------------------------------
def sig_expit(m: np.ndarray) -> np.ndarray:
    return special.expit(-m)


def sig_tanh(m: np.ndarray) -> np.ndarray:
    """sigma(-m) = 0.5 - 0.5 tanh(m/2), one allocation, in place after it."""
    buf = m * -0.5
    np.tanh(buf, out=buf)
    buf *= 0.5
    buf += 0.5
    return buf


def sig_expit_into(m: np.ndarray, buf: np.ndarray) -> np.ndarray:
    np.negative(m, out=buf)
    special.expit(buf, out=buf)
    return buf


def sigmoid_accuracy() -> list[dict]:
    rng = np.random.default_rng(1)
    m = np.concatenate([np.linspace(-60, 60, 240001), rng.standard_normal(200000) * 4])
    rows = []
    for dtype, rel_limit in (("float64", 1e-12), ("float32", 1e-4)):
        md = m.astype(dtype)
        refd = special.expit(-md.astype(np.float64))    # reference at the rounded margins
        for form, fn in (("expit", sig_expit), ("tanh", sig_tanh)):
            s = fn(md).astype(np.float64)
            abs_err = np.abs(s - refd)
            rel_err = abs_err / refd
            bad = m[rel_err > rel_limit]
            zero = m[(s == 0)]
            rows.append({"lever": "sigmoid", "part": "accuracy", "dtype": dtype, "form": form,
                         "max_abs_error": float(abs_err.max()), "max_rel_error": float(rel_err.max()),
                         "max_rel_error_m_le_10": float(rel_err[m <= 10].max()),
                         "rel_limit": rel_limit,
                         "rel_error_exceeds_limit_from_m": float(bad.min()) if bad.size else np.nan,
                         "rounds_to_zero_from_m": float(zero.min()) if zero.size else np.nan})
            print(f"sigmoid accuracy {dtype} {form}: abs {abs_err.max():.3g} rel {rel_err.max():.3g} "
                  f"rel>{rel_limit:g} from m={rows[-1]['rel_error_exceeds_limit_from_m']}", flush=True)
    return rows


def sigmoid_micro(problems: dict, repeats: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(2)
    for shape, (p64, _) in problems.items():
        for dtype in DTYPES:
            itemsize = np.dtype(dtype).itemsize
            block = row_block(p64.d, GEMM_BLOCK_BYTES, itemsize)
            for S in MICRO_RUNS:
                full = (rng.standard_normal((S, 4 * block)) * 2).astype(dtype)
                m = full[:, :block]                  # a block view of an (S, n) array, as _gemm_pass slices it
                buf = np.empty_like(m)
                t = timed({"expit": lambda: sig_expit(m), "tanh": lambda: sig_tanh(m),
                           "expit_into": lambda: sig_expit_into(m, buf)}, repeats, 0.003)
                r = {"lever": "sigmoid", "part": "micro", "shape": shape, "d": p64.d, "dtype": dtype, "S": S,
                     "block": block, "elements": S * block, **ratio_fields(t, "expit", "tanh"),
                     "expit_into_ms": 1e3 * float(np.median(t["expit_into"])),
                     "ratio_expit_into": float(np.median(t["expit"]) / np.median(t["expit_into"])),
                     "ns_per_element_expit": 1e9 * float(np.median(t["expit"])) / (S * block),
                     "ns_per_element_tanh": 1e9 * float(np.median(t["tanh"])) / (S * block)}
                rows.append(r)
                print(f"sigmoid micro {shape} {dtype} S={S} block={block}: expit/tanh {r['ratio']:.2f} "
                      f"expit/expit_into {r['ratio_expit_into']:.2f}", flush=True)
    return rows


def first_order_copy(p: LogisticProblem, W: np.ndarray, sigmoid) -> tuple[np.ndarray, np.ndarray]:
    """LogisticProblem.margins_and_grads (dense Z) with the sigmoid sigma(-m) replaced by ``sigmoid``."""
    n, d = p.n, p.d
    W = p._in(W)
    if W.shape[0] >= GEMM_MIN_RUNS:
        Mt = np.empty((W.shape[0], n), dtype=p.Z.dtype)
        G = np.zeros((W.shape[0], d))
        block = row_block(d, GEMM_BLOCK_BYTES, p.Z.dtype.itemsize)
        for a in range(0, n, block):
            Zb = p.Z[a:a + block]
            Mb = Mt[:, a:a + block]
            np.matmul(W, Zb.T, out=Mb)
            G -= sigmoid(Mb) @ Zb
        return p._out(Mt.T), G / n
    Mt = np.empty((W.shape[0], n), dtype=p.Z.dtype)
    G = np.zeros((W.shape[0], d))
    block = row_block(d, itemsize=p.Z.dtype.itemsize)
    for a in range(0, n, block):
        Zb = p.Z[a:a + block]
        Zbt = Zb.T
        for j in range(W.shape[0]):
            m = Mt[j, a:a + block]
            np.dot(Zb, W[j], out=m)
            G[j] -= Zbt @ sigmoid(m)
    return p._out(Mt.T), G / n


def sigmoid_loop(p: LogisticProblem, Mt: np.ndarray, sigmoid) -> None:
    """The sigmoid calls of one first-order pass alone, on the slices the pass makes (Mt: (S, n))."""
    S = Mt.shape[0]
    if S >= GEMM_MIN_RUNS:
        block = row_block(p.d, GEMM_BLOCK_BYTES, p.Z.dtype.itemsize)
        for a in range(0, p.n, block):
            sigmoid(Mt[:, a:a + block])
    else:
        block = row_block(p.d, FIRST_ORDER_BLOCK_BYTES, p.Z.dtype.itemsize)
        for a in range(0, p.n, block):
            for j in range(S):
                sigmoid(Mt[j, a:a + block])


def sigmoid_pass(problems: dict, repeats: int) -> list[dict]:
    rows = []
    for shape, pair in problems.items():
        for p in pair:
            for S in PASS_RUNS:
                W = stack(p, S, 10)
                M_lib, G_lib = p.margins_and_grads(W)
                M_c, G_c = first_order_copy(p, W, sig_expit)
                identical = bool(np.array_equal(M_lib, M_c) and np.array_equal(G_lib, G_c))
                _, G_t = first_order_copy(p, W, sig_tanh)
                Mt = np.ascontiguousarray(p._in(M_lib).T)
                t = timed({"library": lambda: p.margins_and_grads(W),
                           "tanh_copy": lambda: first_order_copy(p, W, sig_tanh),
                           "expit_calls": lambda: sigmoid_loop(p, Mt, sig_expit),
                           "tanh_calls": lambda: sigmoid_loop(p, Mt, sig_tanh)}, repeats, 0.02)
                lib, ex, th = (float(np.median(t[k])) for k in ("library", "expit_calls", "tanh_calls"))
                g_rel = float(np.max(np.linalg.norm(G_t - G_lib, axis=1) / np.linalg.norm(G_lib, axis=1)))
                r = {"lever": "sigmoid", "part": "whole pass", "shape": shape, "n": p.n, "d": p.d,
                     "dtype": p.precision, "S": S, "pass": "GEMM" if S >= GEMM_MIN_RUNS else "blocked gemv",
                     **ratio_fields(t, "library", "tanh_copy"), "expit_share": ex / lib,
                     "expit_calls_ms": 1e3 * ex, "tanh_calls_ms": 1e3 * th,
                     "predicted_ratio": lib / (lib - ex + th), "grad_rel_change": g_rel,
                     "copy_bits_identical": identical}
                rows.append(r)
                print(f"sigmoid pass {shape} {p.precision} S={S}: lib/tanh {r['ratio']:.3f} expit share "
                      f"{r['expit_share']:.2f} grad rel change {g_rel:.2g} identical copy {identical}", flush=True)
    return rows


# ---- 2. eigh -------------------------------------------------------------------------------------
def clip_direction(H, g, lam, dtype):
    """modified_newton_direction(H, g, lam, "clip") with the eigh in ``dtype`` (direction formed in float64)."""
    vals, vecs = linalg.eigh(H.astype(dtype, copy=False), check_finite=False, driver="evd")
    vals, vecs = vals.astype(np.float64), vecs.astype(np.float64)
    return vecs @ ((vecs.T @ g) / np.maximum(vals, lam))


def add_direction(H, g, lam, dtype, refine: bool = False):
    """modified_newton_direction(H, g, lam, "add") with the Cholesky in ``dtype``, optionally one float64
    refinement step x += A^-1 (g - A x) (A = H + lam I, the residual in float64)."""
    A = H + lam * np.eye(H.shape[0])
    factor = linalg.cho_factor(A.astype(dtype), lower=False, check_finite=False)
    x = linalg.cho_solve(factor, g.astype(dtype), check_finite=False).astype(np.float64)
    if refine:
        r = g - A @ x
        x += linalg.cho_solve(factor, r.astype(dtype), check_finite=False)
    return x


def eigh_lever(problems: dict, repeats: int) -> list[dict]:
    rows = []
    for shape, (p64, p32) in problems.items():
        w = point(p64, 20)
        _, _, H = p64.newton_pass(w, "hessian")
        g = np.random.default_rng(21).standard_normal(p64.d)
        g /= np.linalg.norm(g)
        ev = np.linalg.eigvalsh(H)
        lam = 1e-3
        t = timed({"eigh64": lambda: clip_direction(H, g, lam, np.float64),
                   "eigh32": lambda: clip_direction(H, g, lam, np.float32),
                   "chol64": lambda: add_direction(H, g, lam, np.float64),
                   "chol32": lambda: add_direction(H, g, lam, np.float32),
                   "chol32_refined": lambda: add_direction(H, g, lam, np.float32, True),
                   "pass64": lambda: p64.newton_pass(w, "hessian"),
                   "pass32": lambda: p32.newton_pass(w, "hessian")}, repeats, 0.02)
        med = {k: float(np.median(v)) for k, v in t.items()}
        base = {"lever": "eigh", "shape": shape, "n": p64.n, "d": p64.d,
                "H_eig_max": float(ev[-1]), "H_eig_min": float(ev[0]),
                "pass64_ms": 1e3 * med["pass64"], "pass32_ms": 1e3 * med["pass32"]}
        for what, b, a in (("clip: eigh float64 -> float32", "eigh64", "eigh32"),
                           ("add: cholesky float64 -> float32", "chol64", "chol32"),
                           ("add: cholesky float64 -> float32 + 1 refinement", "chol64", "chol32_refined")):
            r = {**base, "part": what, **ratio_fields(t, b, a)}
            # the step as the claims config runs it: float32 pass + float64 factorisation; and a float64 step
            r["step_ratio_pass32"] = (med["pass32"] + med[b]) / (med["pass32"] + med[a])
            r["step_ratio_pass64"] = (med["pass64"] + med[b]) / (med["pass64"] + med[a])
            r["factor_share_of_step_pass32"] = med[b] / (med["pass32"] + med[b])
            for lam_ in LAMBDAS:
                if b == "eigh64":
                    ref, new = clip_direction(H, g, lam_, np.float64), clip_direction(H, g, lam_, np.float32)
                else:
                    ref = add_direction(H, g, lam_, np.float64)
                    new = add_direction(H, g, lam_, np.float32, a == "chol32_refined")
                r[f"rel_error_lambda_{lam_:g}"] = float(np.linalg.norm(new - ref) / np.linalg.norm(ref))
            rows.append(r)
            print(f"eigh {shape} {what}: {r['ratio']:.2f}x, step {r['step_ratio_pass32']:.3f}x, rel err "
                  + " ".join(f"{r[f'rel_error_lambda_{x:g}']:.2g}" for x in LAMBDAS), flush=True)
    return rows


# ---- 3. width ------------------------------------------------------------------------------------
def width_lever(problems: dict, repeats: int) -> list[dict]:
    rows = []
    for shape, pair in problems.items():
        for p in pair:
            stacks = {S: stack(p, S, 30) for S in WIDTHS}
            t = timed({S: (lambda W=W: p.margins_and_grads(W)) for S, W in stacks.items()}, repeats, 0.02)
            per_run = {S: float(np.median(v)) / S for S, v in t.items()}
            paired = {S: t[S] / S for S in WIDTHS}
            for S in WIDTHS:
                rows.append({"lever": "width", "shape": shape, "n": p.n, "d": p.d, "dtype": p.precision, "S": S,
                             "pass": "GEMM" if S >= GEMM_MIN_RUNS else "blocked gemv",
                             "call_ms": 1e3 * float(np.median(t[S])), "per_run_ms": 1e3 * per_run[S],
                             "per_run_vs_S1": per_run[S] / per_run[1],
                             "per_run_vs_S8": per_run[S] / per_run[8], "per_run_vs_S16": per_run[S] / per_run[16],
                             "paired_vs_S8": float(np.median(paired[S] / paired[8])),
                             "paired_vs_S16": float(np.median(paired[S] / paired[16])), "repeats": repeats})
                print(f"width {shape} {p.precision} S={S}: per run {1e3 * per_run[S]:.3f} ms, vs 8 "
                      f"{rows[-1]['per_run_vs_S8']:.2f}, vs 16 {rows[-1]['per_run_vs_S16']:.2f}", flush=True)
    return rows


# ---- 4. Newton pass vs bare SYRK -----------------------------------------------------------------
def syrk_fn(single: bool):
    return blas.ssyrk if single else blas.dsyrk


def bare_syrk(p: LogisticProblem):
    """One SYRK over the whole of Z (upper triangle), no scaling."""
    return syrk_fn(p.precision == "float32")(1.0, p.Z.T, trans=0, lower=0)


def blocked_syrk(p: LogisticProblem, block_bytes: int = GRAM_BLOCK_BYTES):
    """SYRK over Z's row blocks of the library's Gram pass (accumulated as gram_pass does), no scaling."""
    single = p.precision == "float32"
    d = p.d
    block = row_block(d, block_bytes, p.Z.dtype.itemsize)
    upper = np.zeros((d, d), order="F")
    part = np.zeros((d, d), dtype=p.Z.dtype, order="F") if single else None
    for a in range(0, p.n, block):
        Zb = p.Z[a:a + block]
        if single:
            part = blas.ssyrk(1.0, Zb.T, beta=0.0, c=part, trans=0, lower=0, overwrite_c=1)
            upper += part
        else:
            upper = blas.dsyrk(1.0, Zb.T, beta=1.0, c=upper, trans=0, lower=0, overwrite_c=1)
    return upper


def fused_copy(p: LogisticProblem, w: np.ndarray, block_bytes: int = GRAM_BLOCK_BYTES, product: str = "syrk",
               sigmoid: str = "library", pieces: dict | None = None):
    """gram_pass(p, w=w, kind="hessian") (dense), with the changes of the variants:

    ``block_bytes`` the Gram block; ``product`` "syrk" (the library) or "gemm" (the full d x d product);
    ``sigmoid`` "library" (expit(-m) for the gradient, expit(m) expit(-m) for c), "one-expit" or "one-tanh"
    (s = sigma(-m) once, c = s (1 - s)). ``pieces``: a dict that accumulates the CPU time of every step.
    Returns (m, g / n, H / n) like newton_pass."""
    count, d = p.Z.shape
    dtype = p.Z.dtype
    single = p.precision == "float32"
    block = row_block(d, block_bytes, dtype.itemsize)
    work = np.empty((block, d), dtype=dtype)
    full = product == "gemm"
    upper = np.zeros((d, d), order="F")
    part = np.zeros((d, d), dtype=dtype, order="F") if single else None
    w = p._in(w)
    g = np.zeros(d)
    m = np.empty(count, dtype=dtype)
    gemm = blas.sgemm if single else blas.dgemm
    syrk = syrk_fn(single)
    clock = CLOCK if pieces is not None else None

    def tick(name, t0):
        t1 = clock()
        pieces[name] = pieces.get(name, 0.0) + t1 - t0
        return t1

    for a in range(0, count, block):
        t = clock() if clock else 0.0
        Zb = p.Z[a:a + block]
        scaled = work[:Zb.shape[0]]
        m_b = m[a:a + block]
        np.dot(Zb, w, out=m_b)
        t = tick("gemv margins", t) if clock else t
        if sigmoid == "library":
            s = special.expit(-m_b)
        elif sigmoid == "one-expit":
            s = special.expit(-m_b)
        else:
            s = sig_tanh(m_b)
        t = tick("sigmoid for gradient", t) if clock else t
        g -= Zb.T @ s
        t = tick("gemv gradient", t) if clock else t
        if sigmoid == "library":
            c = hessian_coefficient(m_b)
        else:
            c = 1.0 - s
            c *= s
        t = tick("Hessian coefficient", t) if clock else t
        root = np.sqrt(c)
        t = tick("sqrt", t) if clock else t
        np.multiply(Zb, p._in(root)[:, None], out=scaled)
        t = tick("row scaling", t) if clock else t
        if full and not single:
            upper = gemm(1.0, scaled.T, scaled.T, trans_b=1, beta=1.0, c=upper, overwrite_c=1)
        elif full:
            part = gemm(1.0, scaled.T, scaled.T, trans_b=1, beta=0.0, c=part, overwrite_c=1)
            upper += part
        elif single:
            part = syrk(1.0, scaled.T, beta=0.0, c=part, trans=0, lower=0, overwrite_c=1)
            upper += part
        else:
            upper = syrk(1.0, scaled.T, beta=1.0, c=upper, trans=0, lower=0, overwrite_c=1)
        if clock:
            tick("SYRK/GEMM (+ float64 sum)", t)
    if full:
        gram = upper
    else:
        gram = np.triu(upper) + np.triu(upper, 1).T
    return p._out(m), g / count, gram / count


VARIANTS = {
    "copy": {},
    "block 4 MiB": {"block_bytes": BIG_BLOCK_BYTES},
    "block 256 KiB": {"block_bytes": SMALL_BLOCK_BYTES},
    "GEMM instead of SYRK": {"product": "gemm"},
    "one sigmoid (expit)": {"sigmoid": "one-expit"},
    "one sigmoid (tanh)": {"sigmoid": "one-tanh"},
    "one sigmoid (tanh) + block 4 MiB": {"sigmoid": "one-tanh", "block_bytes": BIG_BLOCK_BYTES},
    "one sigmoid (tanh) + block 256 KiB": {"sigmoid": "one-tanh", "block_bytes": SMALL_BLOCK_BYTES},
}


def rel_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


def newton_lever(problems: dict, repeats: int) -> list[dict]:
    rows = []
    for shape, pair in problems.items():
        for p in pair:
            w = point(p, 40)
            ref = p.newton_pass(w, "hessian")
            funcs = {"library": lambda: p.newton_pass(w, "hessian"), "bare SYRK": lambda: bare_syrk(p),
                     "blocked SYRK": lambda: blocked_syrk(p)}
            for name, kw in VARIANTS.items():
                funcs[name] = (lambda kw=kw: fused_copy(p, w, **kw))
            pieces_runs: list[dict] = []

            def instrumented():
                pieces_runs.append({})
                fused_copy(p, w, pieces=pieces_runs[-1])

            funcs["instrumented copy"] = instrumented
            t = timed(funcs, repeats, 0.02)
            med = {k: float(np.median(v)) for k, v in t.items()}
            bare, blocked = med["bare SYRK"], med["blocked SYRK"]
            for name in ["library", "blocked SYRK", *VARIANTS]:
                r = {"lever": "newton", "part": "pass", "shape": shape, "n": p.n, "d": p.d, "dtype": p.precision,
                     "what": name, "ms": 1e3 * med[name], "bare_syrk_ms": 1e3 * bare,
                     "ratio_vs_bare_syrk": med[name] / bare,
                     "paired_ratio_vs_bare_syrk": float(np.median(t[name] / t["bare SYRK"])),
                     "ratio_vs_blocked_syrk": med[name] / blocked,
                     "ratio_vs_library": med[name] / med["library"],
                     "within_target": bool(med[name] / bare <= TARGET), "repeats": repeats}
                if name in VARIANTS:
                    out = fused_copy(p, w, **VARIANTS[name])
                    r.update({"m_rel_diff": rel_diff(out[0], ref[0]), "g_rel_diff": rel_diff(out[1], ref[1]),
                              "H_rel_diff": rel_diff(out[2], ref[2])})
                rows.append(r)
                print(f"newton {shape} {p.precision} {name}: {1e3 * med[name]:.2f} ms, x{r['ratio_vs_bare_syrk']:.3f} "
                      f"of bare SYRK ({1e3 * bare:.2f} ms)", flush=True)
            total = float(np.median([sum(x.values()) for x in pieces_runs[1:]]))
            for piece in pieces_runs[1]:
                v = float(np.median([x[piece] for x in pieces_runs[1:]]))
                rows.append({"lever": "newton", "part": "piece", "shape": shape, "n": p.n, "d": p.d,
                             "dtype": p.precision, "what": piece, "ms": 1e3 * v, "share_of_pass": v / total,
                             "ratio_vs_bare_syrk": v / bare, "repeats": len(pieces_runs) - 1})
    return rows


# ---- report --------------------------------------------------------------------------------------
FMT = {k: ".3f" for k in ("before_ms", "after_ms", "expit_into_ms", "ms", "bare_syrk_ms", "call_ms", "per_run_ms",
                           "pass64_ms", "pass32_ms", "expit_calls_ms", "tanh_calls_ms")}
FMT.update({k: ".2f" for k in ("ratio", "paired_ratio", "ratio_expit_into", "ns_per_element_expit",
                                "ns_per_element_tanh", "expit_share", "predicted_ratio", "per_run_vs_S1",
                                "per_run_vs_S8", "per_run_vs_S16", "paired_vs_S8", "paired_vs_S16",
                                "ratio_vs_bare_syrk", "paired_ratio_vs_bare_syrk", "ratio_vs_blocked_syrk",
                                "ratio_vs_library", "share_of_pass", "step_ratio_pass32", "step_ratio_pass64",
                                "factor_share_of_step_pass32")})
FMT.update({k: ".2e" for k in ("max_abs_error", "max_rel_error", "max_rel_error_m_le_10", "grad_rel_change",
                                "m_rel_diff", "g_rel_diff", "H_rel_diff", "H_eig_max", "H_eig_min",
                                *(f"rel_error_lambda_{x:g}" for x in LAMBDAS))})


def markdown(rows: list[dict], args, loads: tuple, minutes: float, shapes: dict) -> str:
    def sel(lever, part=None):
        return [r for r in rows if r["lever"] == lever and (part is None or r.get("part") == part)]

    shape_txt = ", ".join(f"{k} {n} x {d}" for k, (n, d) in shapes.items())
    md = [f"Four per-step levers, each a before/after ratio (> 1: the change is faster) with an accuracy check. "
          f"Synthetic dense Z ({shape_txt}; Gaussian rows with column scales 1 to 1e-3, projected into the unit "
          f"ball), float64 and float32 (`with_precision`). BLAS 1 thread, thread CPU time, repetitions "
          f"interleaved (before, after, before, after, ...), **medians** reported (`ratio` = median before / "
          f"median after, `paired_ratio` = median of the per-repetition ratios). The machine is shared (2 cores; "
          f"load average {loads[0]:.2f} at the start, {loads[1]:.2f} at the end of this {minutes:.1f}-minute run"
          f"{', --quick' if args.quick else ''}), hence CPU time and medians. All in `step_levers.csv` "
          f"(column `lever`).", ""]
    if sel("sigmoid"):
        md += ["**1. Sigmoid: `expit(-m)` vs the tanh form 0.5 - 0.5 tanh(m/2) in place.** Micro: one GEMM-pass "
               "block of margins, (S, block) views of an (S, n) array; `expit_into` = expit into a preallocated "
               "buffer (the allocation alone).", "",
               common.md_table(sel("sigmoid", "micro"),
                               ["shape", "dtype", "S", "block", "before_ms", "after_ms", "ratio", "paired_ratio",
                                "expit_into_ms", "ratio_expit_into", "ns_per_element_expit", "ns_per_element_tanh"],
                               FMT), "",
               "Accuracy against float64 expit at the same (rounded) margins, m in [-60, 60] and N(0, 16) draws; "
               "`rel_error_exceeds_limit_from_m`: smallest m whose relative error exceeds `rel_limit`; "
               "`rounds_to_zero_from_m`: smallest m where the form returns exactly 0.", "",
               common.md_table(sel("sigmoid", "accuracy"),
                               ["dtype", "form", "max_abs_error", "max_rel_error", "max_rel_error_m_le_10",
                                "rel_limit", "rel_error_exceeds_limit_from_m", "rounds_to_zero_from_m"], FMT), "",
               "Whole first-order pass: library `margins_and_grads` (before) vs a copy with the tanh form (after); "
               "`expit_share` = the pass's expit calls alone (same slices) / the pass; `predicted_ratio` = pass / "
               "(pass - expit calls + tanh calls); `grad_rel_change` = max over runs of ||G_tanh - G|| / ||G||; "
               "`copy_bits_identical`: the copy with expit reproduces the library's bits.", "",
               common.md_table(sel("sigmoid", "whole pass"),
                               ["shape", "dtype", "S", "pass", "before_ms", "after_ms", "ratio", "paired_ratio",
                                "expit_share", "predicted_ratio", "grad_rel_change", "copy_bits_identical"], FMT),
               ""]
    if sel("eigh"):
        md += ["**2. float32 factorisations of the Newton direction.** `before`/`after` = the direction in float64 / "
               "with the factorisation in float32 (`clip`: scipy `eigh` driver evd, as "
               "`newton_direction.modified_newton_direction`; `add`: Cholesky, optionally one float64 refinement "
               "step). H = exact Hessian at margins ~ N(0, 4), g a random unit vector. `step_ratio_pass32` = "
               "(float32 fused pass + float64 factorisation) / (float32 pass + float32 factorisation): the claims "
               "config's whole Newton step; `step_ratio_pass64` the same with the float64 pass; "
               "`factor_share_of_step_pass32` = the float64 factorisation's share of that step. "
               "`rel_error_lambda_L` = ||d32 - d64|| / ||d64|| at lambda = L.", "",
               common.md_table(sel("eigh"),
                               ["shape", "d", "part", "before_ms", "after_ms", "ratio", "paired_ratio", "pass32_ms",
                                "pass64_ms", "factor_share_of_step_pass32", "step_ratio_pass32",
                                "step_ratio_pass64", "H_eig_max", "H_eig_min",
                                *(f"rel_error_lambda_{x:g}" for x in LAMBDAS)], FMT), ""]
    if sel("width"):
        md += ["**3. DP-GD batch width: `margins_and_grads(W)` of S runs** (blocked gemv pass below "
               f"GEMM_MIN_RUNS = {GEMM_MIN_RUNS}, GEMM pass from it). `per_run_vs_S8` / `per_run_vs_S16` = per-run "
               "time / that at S = 8 / 16 (< 1: cheaper per run); `paired_*` the same as medians of "
               "per-repetition ratios.", "",
               common.md_table(sel("width"),
                               ["shape", "dtype", "S", "pass", "call_ms", "per_run_ms", "per_run_vs_S1",
                                "per_run_vs_S8", "per_run_vs_S16", "paired_vs_S8", "paired_vs_S16"], FMT), ""]
    if sel("newton"):
        md += ["**4. Fused Newton pass (`newton_pass(w, \"hessian\")`) vs a bare SYRK over the whole of Z** "
               f"(`ratio_vs_bare_syrk`, target <= {TARGET}); `blocked SYRK` = SYRK over the library's Gram blocks, "
               "no scaling; the variants are copies of `gram_pass` with one change each (`copy`: none), "
               "`*_rel_diff` = max |variant - library| / max |library| of m, g, H.", "",
               common.md_table(sel("newton", "pass"),
                               ["shape", "dtype", "what", "ms", "bare_syrk_ms", "ratio_vs_bare_syrk",
                                "paired_ratio_vs_bare_syrk", "ratio_vs_blocked_syrk", "ratio_vs_library",
                                "within_target", "m_rel_diff", "g_rel_diff", "H_rel_diff"], FMT), "",
               "Pieces of the fused pass (an instrumented copy, CPU time per step summed over the blocks; "
               "`share_of_pass` of the instrumented total, `ratio_vs_bare_syrk` = piece / bare SYRK):", "",
               common.md_table(sel("newton", "piece"),
                               ["shape", "dtype", "what", "ms", "share_of_pass", "ratio_vs_bare_syrk"], FMT), ""]
    return "\n".join(md)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: n / 6, fewer repetitions (~1 min)")
    ap.add_argument("--only", nargs="+", choices=["sigmoid", "eigh", "width", "newton"],
                    default=["sigmoid", "eigh", "width", "newton"])
    ap.add_argument("--repeats-scale", type=float, default=1.0, help="multiply every repetition count")
    args = ap.parse_args()
    start, load0 = time.perf_counter(), os.getloadavg()[0]
    div = 6 if args.quick else 1
    scale = (0.4 if args.quick else 1.0) * args.repeats_scale

    def reps(k):
        return max(3, int(round(k * scale)))

    shapes = {k: (n // div, d) for k, (n, d) in SHAPES.items()}
    eigh_shapes = {**{k: v for k, v in shapes.items() if k == "a1a-like"},
                   **{k: (n // div, d) for k, (n, d) in EIGH_EXTRA.items()},
                   **{k: v for k, v in shapes.items() if k == "fashion-like"}}
    problems, rows = {}, []
    for k, (n, d) in {**shapes, **eigh_shapes}.items():
        p = synthetic_problem(n, d, seed=d)
        problems[k] = (p, p.with_precision("float32"))
    main_problems = {k: problems[k] for k in shapes}
    with threadpool_limits(1):
        if "sigmoid" in args.only:
            rows += sigmoid_accuracy()
            rows += sigmoid_micro(main_problems, reps(25))
            rows += sigmoid_pass(main_problems, reps(11))
        if "eigh" in args.only:
            rows += eigh_lever({k: problems[k] for k in eigh_shapes}, reps(11))
        if "width" in args.only:
            rows += width_lever(main_problems, reps(11))
        if "newton" in args.only:
            rows += newton_lever(main_problems, reps(11))
    minutes = (time.perf_counter() - start) / 60
    name = "step_levers_quick" if args.quick else "step_levers"
    common.write_csv(f"{name}.csv", rows)
    text = markdown(rows, args, (load0, os.getloadavg()[0]), minutes, {**shapes, **eigh_shapes})
    if args.quick:
        (common.RESULTS_DIR / f"{name}.md").write_text(text + "\n")
    else:
        common.write_section(name, text)
    print(f"done in {minutes:.1f} min -> results/{name}.csv, .md")


if __name__ == "__main__":
    main()
