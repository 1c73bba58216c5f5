"""Compute-budget frontier: the best mean excess loss each method reaches within a budget.

For each (dataset, conversion, epsilon, method) and each budget B of a log grid, the frontier is the
smallest mean excess loss over seeds (the summary table's ``excess_loss_mean``) over every declared
configuration of the method (a *method* is a base algorithm; its configurations are the config's
algorithm entries with that base, e.g. tuned variants) and every T of the grid whose cost fits in
B (cost <= B). A non-finite mean never wins; on equal means the cheaper (configuration, T) wins,
then the configuration name. A budget below every cost gives NaN. Selecting T and the
configuration by the true loss is **non-private** (as the paper's best-T protocol).

Two cost measures (``measure``):

* ``runtime_s``: the timing stage's lone-run model, runtime(T) = first + (T - 1) x cost
  (:func:`dpnewton.pipeline.timing.lone_runtime`). A configuration the timing stage did not time
  has no runtime cost: it is never inside a budget, and a method with no timed configuration has
  NaN on the whole runtime frontier (``costed`` = 0).
* ``passes``: hardware-independent, in gradient passes over Z (:func:`pass_equivalents`).

A one-shot method (AOP, objpert) has no T: it solves its perturbed objective once by Newton's method
with the exact Hessian, and its run records the Newton steps k it took (``solver_steps_mean`` of the
summary, mean over seeds). Its cost is modelled from k: :func:`solve_passes`, and as a runtime k + 1
lone-run updates of :data:`ONE_SHOT_TIMED_AS` (one fused gradient-and-Hessian pass and one d x d
factorisation each). Both are noted in the table (:data:`ONE_SHOT_NOTES`).

:func:`crossover` reads the frontier table: per (dataset, conversion, epsilon, measure), the
budgets where a private second-order method is best and the budget where a first-order method
overtakes it.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ..algorithms.cubic_newton import CubicNewtonConfig
from ..algorithms.minibatch import MinibatchNewtonConfig, SgdConfig
from .timing import lone_runtime

#: measured in benchmarks/pass_costs.py (benchmarks/results/pass_costs.md; numpy 2.4 / OpenBLAS 0.3.30,
#: one thread, x86_64): a Gram pass Z^T diag(c) Z costs GRAM_PER_D x d gradient passes, a d x d
#: ``eigh`` EIGH_PER_D2_OVER_N x d^2 / n gradient passes (per-element fits t = a n d, b n d^2, c d^3,
#: medians over six shapes; within a factor ~2-3 of each shape's own ratio).
GRAM_PER_D = 0.131
EIGH_PER_D2_OVER_N = 2.166
#: DP-GD-Oracle's Armijo scan (t = 100 x 0.95^k down to 1e-6: ~360 candidates) found by bisection: about
#: log2(360) ~ 9 loss evaluations per step, each the margins Z w (half a gradient pass)
ORACLE_LOSS_EVALS = 9

DOUBLE_NOISE = ("hess-clip", "hess-add", "qu-clip", "qu-add")
MINIBATCH_DOUBLE_NOISE = tuple(f"minibatch-{b}" for b in DOUBLE_NOISE)
#: each method's role, for the winner by budget and the claims' "Beyond the paper": private second-order
#: methods (Newton-type updates, or DP-GD with a privately released curvature: precond-dp-gd), first-order
#: methods, methods with a non-private step (never a winner), one-shot methods (no iteration budget)
ROLES = {**{b: "second-order" for b in DOUBLE_NOISE + MINIBATCH_DOUBLE_NOISE + ("cubic-newton", "precond-dp-gd")},
         "dp-gd": "first-order", "dp-sgd": "first-order",
         "dp-gd-oracle": "non-private step", "damped-newton": "non-private step", "aop": "one-shot",
         "objpert": "one-shot"}
#: the timed configuration whose update stands for one Newton step of a one-shot solve (runtime model)
ONE_SHOT_TIMED_AS = "hess-clip"
ONE_SHOT_NOTES = {"passes": "modelled from the recorded Newton steps (solve_passes)",
                  "runtime_s": f"modelled: (Newton steps + 1) x the timed {ONE_SHOT_TIMED_AS} update"}
MEASURES = ("runtime_s", "passes")
MEASURE_LABELS = {"runtime_s": "runtime", "passes": "gradient passes"}
N_BUDGETS = 13
LONG_COLUMNS = ["dataset", "conversion", "epsilon", "measure", "budget_index", "budget", "method", "role",
                "best_excess_loss", "best_algorithm", "best_T", "best_cost", "configurations", "costed", "note"]
#: the written table's columns per measure (its runtime columns all start with ``runtime_``: they are
#: timings, not bit-reproducible, unlike everything else in the table)
PREFIX = {"passes": "passes_", "runtime_s": "runtime_"}
PER_MEASURE = ["budget", "best_excess_loss", "best_algorithm", "best_T", "best_cost", "costed", "note"]
KEYS = ["dataset", "conversion", "epsilon", "method", "role", "configurations", "budget_index"]
COLUMNS = KEYS + [PREFIX[m] + c for m in ("passes", "runtime_s") for c in PER_MEASURE]
CROSSOVER_COLUMNS = ["dataset", "conversion", "epsilon", "measure", "budgets", "second_order_budgets",
                     "second_order_from", "second_order_to", "second_order_winner", "crossover_budget",
                     "first_order_winner", "note"]


def role(method: str) -> str:
    return ROLES.get(method, "other")


def members(role_name: str, methods) -> tuple[str, ...]:
    """The methods of ``role_name`` among ``methods`` (e.g. the base algorithms of a run), in
    :data:`ROLES` order: what a report names, rather than every method the package has."""
    present = set(methods)
    return tuple(b for b, r in ROLES.items() if r == role_name and b in present)


SECOND_ORDER = members("second-order", ROLES)
FIRST_ORDER = members("first-order", ROLES)


def hyper_dict(h) -> dict:
    """A row's ``hyper`` as a dict (tables store it as JSON text; anything else is {})."""
    if isinstance(h, dict):
        return h
    if isinstance(h, str) and h.strip():
        try:
            v = json.loads(h)
            return v if isinstance(v, dict) else {}
        except ValueError:
            return {}
    return {}


def _batch_fraction(hyper: dict, n: int, key: str, config) -> float:
    """Expected batch / n of ``hyper[key]`` (or ``batch_size``), else ``batch_frac`` (default: the
    algorithm's ``config`` dataclass's)."""
    b = hyper.get(key, hyper.get("batch_size"))
    if b is not None:
        return min(1.0, float(b) / n)
    return float(hyper.get("batch_frac", config.batch_frac))


def pass_equivalents(algorithm: str, n: int, d: int, hyper: dict | None = None) -> tuple[float, float]:
    """(first update, each further update) in gradient passes over Z, so that a run of T updates
    costs first + (T - 1) x per-update passes (the shape of the runtime model).

    Units: one gradient pass (margins Z w and Z^T r: one DP-GD update) = 1; a Gram pass
    Z^T diag(c) Z = G = GRAM_PER_D x d; a d x d eigendecomposition E = EIGH_PER_D2_OVER_N x d^2 / n
    (constants measured in benchmarks/pass_costs.py). Per update:

    * ``dp-gd``: 1. ``dp-sgd``: q (expected batch / n, default ``batch_frac``).
    * double noise (``hess-*``, ``qu-*``): the fused pass (gradient + SOI Gram) + the eigh of the
      modified Newton direction: 1 + G + E.
    * ``minibatch-*``: q_g + q_h G + E.
    * ``precond-dp-gd``: 1 (a d x d product is negligible); the first update adds the Gram pass and
      the eigh of B (1 + G + E); with ``refresh`` = k, each update adds (G + E)/k (amortised).
    * ``dp-gd-oracle`` (non-private line search): 1 + ORACLE_LOSS_EVALS x 0.5 (loss evaluations).
    * ``damped-newton``: 1 + G + 2E (eigenvalue clip, and the exact Newton solve of its step size).
    * ``cubic-newton``: 1 + G + max_inner x d / n: its inner solver makes at most ``max_inner`` d x d
      model-gradient products per outer step, each about d / n of a gradient pass (an upper bound).
    * one-shot methods (``aop``, ``objpert``) and unknown algorithms: (NaN, NaN): a one-shot run's
      cost depends on its recorded Newton steps, not on T (:func:`solve_passes`).

    An estimate, not a measurement: BLAS efficiency depends on the shape, and the library's fused
    pass can be cheaper than a separate gradient and Gram pass.
    """
    h = hyper or {}
    G = GRAM_PER_D * d
    E = EIGH_PER_D2_OVER_N * d * d / n
    if algorithm == "dp-gd":
        return 1.0, 1.0
    if algorithm == "dp-sgd":
        q = _batch_fraction(h, n, "batch_size", SgdConfig)
        return q, q
    if algorithm in DOUBLE_NOISE:
        c = 1.0 + G + E
        return c, c
    if algorithm in MINIBATCH_DOUBLE_NOISE:
        c = (_batch_fraction(h, n, "batch_grad", MinibatchNewtonConfig)
             + _batch_fraction(h, n, "batch_hess", MinibatchNewtonConfig) * G + E)
        return c, c
    if algorithm == "precond-dp-gd":
        k = int(h.get("refresh", 0) or 0)
        per = 1.0 + ((G + E) / k if k > 0 else 0.0)
        return 1.0 + G + E, per
    if algorithm == "dp-gd-oracle":
        c = 1.0 + 0.5 * ORACLE_LOSS_EVALS
        return c, c
    if algorithm == "damped-newton":
        c = 1.0 + G + 2.0 * E
        return c, c
    if algorithm == "cubic-newton":
        c = 1.0 + G + int(h.get("max_inner", CubicNewtonConfig.max_inner)) * d / n
        return c, c
    return float("nan"), float("nan")


def run_passes(algorithm: str, n: int, d: int, T, hyper: dict | None = None) -> float:
    """Passes of a run of T updates: first + (T - 1) x per update (0 for T = 0)."""
    if T is None or pd.isna(T):
        return float("nan")
    first, per = pass_equivalents(algorithm, n, d, hyper)
    return 0.0 if T <= 0 else first + (float(T) - 1.0) * per


def solve_passes(steps, n: int, d: int) -> float:
    """Passes of a one-shot Newton solve (:func:`dpnewton.algorithms.aop.minimize_objective`) of k steps:
    k + 1 fused gradient-and-Hessian passes (1 + G each: one at the start and one per iterate), k d x d
    Cholesky factorisations (counted as an eigh E each, an upper bound) and the final gradient check (1):
    (k + 1)(1 + G) + k E + 1. The damped phase's line search evaluates the loss (half a pass each) a
    number of times that the run does not record: not counted. NaN for NaN steps."""
    if steps is None or pd.isna(steps):
        return float("nan")
    k = float(steps)
    return (k + 1.0) * (1.0 + GRAM_PER_D * d) + k * EIGH_PER_D2_OVER_N * d * d / n + 1.0


def budget_grid(costs, n_budgets: int = N_BUDGETS) -> np.ndarray:
    """``n_budgets`` log-spaced budgets from the smallest to the largest positive finite cost (both
    included: something fits in the first budget). A fixed count, so that the table's rows do not
    depend on the timings (only the runtime columns do)."""
    c = np.asarray([x for x in costs if x is not None and math.isfinite(x) and x > 0], dtype=float)
    if not len(c):
        return np.full(n_budgets, np.nan)
    if c.min() == c.max():
        return np.full(n_budgets, c.min())
    return np.geomspace(c.min(), c.max(), n_budgets)


def cost_table(summary: pd.DataFrame, dims: dict, costs: dict) -> pd.DataFrame:
    """The summary rows (dataset, algorithm, conversion, epsilon, T, mean excess loss) with ``method``
    (base algorithm), ``runtime_s`` (lone-run model; NaN if not timed) and ``passes``; a one-shot
    method's both from its mean Newton steps (``solver_steps_mean``; module docstring)."""
    s = summary.copy()
    base = s["base_algorithm"] if "base_algorithm" in s else s["algorithm"]
    s["method"] = base.fillna(s["algorithm"]).astype(str)
    hyper = s["hyper"] if "hyper" in s else pd.Series([{}] * len(s), index=s.index)
    steps = s["solver_steps_mean"] if "solver_steps_mean" in s else pd.Series(np.nan, index=s.index)
    runtime, passes = [], []
    for ds, a, m, t, h, k in zip(s["dataset"], s["algorithm"], s["method"], s["iterations"], hyper, steps):
        n, d = dims.get(ds, (None, None))
        if role(m) == "one-shot":
            runtime.append(float("nan") if pd.isna(k) else lone_runtime(costs, ds, ONE_SHOT_TIMED_AS, k + 1.0))
            passes.append(float("nan") if n is None else solve_passes(k, int(n), int(d)))
        else:
            runtime.append(lone_runtime(costs, ds, a, t))
            passes.append(float("nan") if n is None else run_passes(m, int(n), int(d), t, hyper_dict(h)))
    s["runtime_s"], s["passes"] = runtime, passes
    return s


def frontier_at(group: pd.DataFrame, measure: str, budget: float) -> dict:
    """Best (configuration, T) of one method in one cell within ``budget``: cost <= budget, finite
    mean, smallest mean; ties -> smaller cost, then configuration name, then smaller T."""
    cost = group[measure].to_numpy(dtype=float)
    mean = group["excess_loss_mean"].to_numpy(dtype=float)
    ok = np.isfinite(cost) & (cost <= budget) & np.isfinite(mean)
    if not ok.any():
        return {"best_excess_loss": float("nan"), "best_algorithm": "", "best_T": pd.NA, "best_cost": float("nan")}
    g = group[ok].assign(_cost=cost[ok], _mean=mean[ok]).sort_values(["_mean", "_cost", "algorithm", "iterations"])
    r = g.iloc[0]
    return {"best_excess_loss": float(r["_mean"]), "best_algorithm": str(r["algorithm"]),
            "best_T": int(r["iterations"]), "best_cost": float(r["_cost"])}


def frontier_long(summary: pd.DataFrame, dims: dict, costs: dict, budgets: dict | None = None,
                  n_budgets: int = N_BUDGETS) -> pd.DataFrame:
    """The frontier in long form (LONG_COLUMNS): one row per (dataset, conversion, epsilon, measure,
    budget, method).

    ``dims`` = {dataset: (n, d)} (the baseline table's); ``costs`` = the timing lookup
    (:func:`dpnewton.pipeline.timing.cost_lookup`). ``budgets`` = {(dataset, measure): grid}; by
    default :func:`budget_grid` of every cost of the dataset under that measure (all cells share it).
    """
    s = cost_table(summary, dims, costs)
    rows = []
    for ds, sd in s.groupby("dataset", sort=True):
        for measure in MEASURES:
            grid = (budgets or {}).get((ds, measure))
            if grid is None:
                grid = budget_grid(sd[measure], n_budgets)
            for (conv, eps, method), g in sd.groupby(["conversion", "epsilon", "method"], sort=True):
                n_cfg = int(g["algorithm"].nunique())
                costed = int(g.loc[np.isfinite(g[measure].to_numpy(dtype=float)), "algorithm"].nunique())
                note = ""
                if costed == 0:
                    note = "not timed" if measure == "runtime_s" else "no pass count"
                elif costed < n_cfg:
                    note = f"{n_cfg - costed} of {n_cfg} configurations not costed"
                elif role(method) == "one-shot":
                    note = ONE_SHOT_NOTES[measure]
                for k, b in enumerate(grid):
                    rows.append({"dataset": ds, "conversion": conv, "epsilon": float(eps), "measure": measure,
                                 "budget_index": k, "budget": float(b), "method": method, "role": role(method),
                                 **frontier_at(g, measure, float(b)), "configurations": n_cfg, "costed": costed,
                                 "note": note})
    out = pd.DataFrame(rows, columns=LONG_COLUMNS)
    out["best_T"] = out["best_T"].astype("Int64")
    return out


def frontier_table(summary: pd.DataFrame, dims: dict, costs: dict, budgets: dict | None = None,
                   n_budgets: int = N_BUDGETS) -> pd.DataFrame:
    """The written frontier table (COLUMNS): one row per (dataset, conversion, epsilon, method, budget
    index), the pass frontier in ``passes_*`` and the runtime frontier in ``runtime_*`` columns
    (``runtime_budget`` and ``runtime_best_cost`` in seconds). :func:`to_long` gives it back in long form."""
    long = frontier_long(summary, dims, costs, budgets, n_budgets)
    parts = []
    for m in MEASURES:
        x = long[long["measure"] == m][KEYS + PER_MEASURE]
        parts.append(x.rename(columns={c: PREFIX[m] + c for c in PER_MEASURE}).set_index(KEYS))
    out = parts[1].join(parts[0], how="outer").reset_index() if len(long) else pd.DataFrame(columns=COLUMNS)
    out = (out[COLUMNS].sort_values(["dataset", "conversion", "epsilon", "method", "budget_index"])
           .reset_index(drop=True))
    for m in MEASURES:
        out[PREFIX[m] + "best_T"] = out[PREFIX[m] + "best_T"].astype("Int64")
    return out


def to_long(table: pd.DataFrame) -> pd.DataFrame:
    """The written table (COLUMNS) -> long form (LONG_COLUMNS)."""
    parts = []
    for m in MEASURES:
        x = table[KEYS + [PREFIX[m] + c for c in PER_MEASURE]].rename(columns={PREFIX[m] + c: c for c in PER_MEASURE})
        parts.append(x.assign(measure=m))
    return pd.concat(parts, ignore_index=True)[LONG_COLUMNS]


def crossover(frontier: pd.DataFrame) -> pd.DataFrame:
    """Winner by budget (CROSSOVER_COLUMNS), per (dataset, conversion, epsilon, measure).

    At each budget the winner is the method with the smallest finite frontier value among the roles
    ``second-order`` and ``first-order`` (methods with a non-private step - dp-gd-oracle,
    damped-newton - and the one-shot methods are not candidates; :data:`ROLES`). On an exact
    tie the first-order method wins (the simpler method). ``second_order_from``/``_to``: the smallest
    and largest budget where a second-order method wins (NaN if none); ``second_order_budgets``: at
    how many budgets it wins; ``crossover_budget``: the smallest budget above ``second_order_from``
    where a first-order method wins (NaN if none: second order stays best to the end of the grid);
    the winners named are those at ``second_order_from`` and at the crossover.
    """
    rows = []
    cand = frontier[frontier["role"].isin(["second-order", "first-order"])]
    for key, g in cand.groupby(["dataset", "conversion", "epsilon", "measure"], sort=True):
        winners = []
        for b, gb in g.groupby("budget", sort=True):
            v = gb["best_excess_loss"].to_numpy(dtype=float)
            fin = np.isfinite(v)
            if not fin.any():
                winners.append((b, None, None))
                continue
            gb = gb[fin].assign(_first=(gb[fin]["role"] != "first-order").astype(int))
            w = gb.sort_values(["best_excess_loss", "_first", "method"]).iloc[0]
            winners.append((b, w["method"], w["role"]))
        so = [(b, m) for b, m, r in winners if r == "second-order"]
        rec = dict(zip(["dataset", "conversion", "epsilon", "measure"], key))
        rec.update(budgets=len(winners), second_order_budgets=len(so), second_order_from=np.nan,
                   second_order_to=np.nan, second_order_winner="", crossover_budget=np.nan, first_order_winner="",
                   note="")
        if not so:
            rec["note"] = ("no method has a finite loss within any budget" if all(m is None for _, m, _ in winners)
                           else "a first-order method is best at every budget")
        else:
            rec.update(second_order_from=so[0][0], second_order_to=so[-1][0], second_order_winner=so[0][1])
            after = [(b, m) for b, m, r in winners if r == "first-order" and b > so[0][0]]
            if after:
                rec.update(crossover_budget=after[0][0], first_order_winner=after[0][1])
            else:
                rec["note"] = "second order stays best to the largest budget"
        rows.append(rec)
    return pd.DataFrame(rows, columns=CROSSOVER_COLUMNS)


def dims_from_baseline(baseline: pd.DataFrame) -> dict:
    """{dataset: (n, d)} from the baseline table (the training split's n with a holdout)."""
    if "n" not in baseline or "d" not in baseline:
        return {}
    return {r.dataset: (int(r.n), int(r.d)) for r in baseline.itertuples()
            if pd.notna(r.n) and pd.notna(r.d)}
