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

A one-shot method (role "one-shot" on its card) has no T: it solves its perturbed objective once by
Newton's method with the exact Hessian, and its run records the Newton steps k it took
(``solver_steps_mean`` of the summary, mean over seeds). Its cost is modelled from k:
:func:`~dpnewton.algorithms.costs.solve_passes`, and as a runtime k + 1 lone-run updates of its card's
``timed_as`` (one fused gradient-and-Hessian pass and one d x d factorisation each). Both are noted in
the table (:func:`one_shot_note`).

:func:`crossover` reads the frontier table: per (dataset, conversion, epsilon, measure), the
budgets where a private second-order method is best and the budget where a first-order method
overtakes it.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ..algorithms import ALGORITHMS, get_algorithm, with_role
from ..algorithms.costs import solve_passes
from .timing import lone_runtime

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


def one_shot_note(method: str, measure: str) -> str:
    """How a one-shot method's cost is modelled, for the table's ``note``."""
    if measure == "passes":
        return "modelled from the recorded Newton steps (solve_passes)"
    return f"modelled: (Newton steps + 1) x the timed {get_algorithm(method).timed_as} update"


def role(method: str) -> str:
    """The method's role from its card (:data:`dpnewton.algorithms.ROLES`); "other" if not registered."""
    return ALGORITHMS[method].role if method in ALGORITHMS else "other"


def members(role_name: str, methods) -> tuple[str, ...]:
    """The methods of ``role_name`` among ``methods`` (e.g. the base algorithms of a run), in
    registration order: what a report names, rather than every method the package has."""
    return with_role(role_name, methods)


SECOND_ORDER = with_role("second-order")
FIRST_ORDER = with_role("first-order")


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


def pass_equivalents(algorithm: str, n: int, d: int, hyper: dict | None = None) -> tuple[float, float]:
    """(first update, each further update) in gradient passes over Z, so that a run of T updates
    costs first + (T - 1) x per-update passes (the shape of the runtime model): the card's cost model
    (:meth:`dpnewton.algorithms.AlgorithmSpec.pass_equivalents`, units in :mod:`dpnewton.algorithms.costs`).
    (NaN, NaN) for a one-shot method (its cost depends on its recorded Newton steps: :func:`solve_passes`)
    and for an unregistered name."""
    if algorithm not in ALGORITHMS:
        return float("nan"), float("nan")
    return get_algorithm(algorithm).pass_equivalents(n, d, hyper)


def run_passes(algorithm: str, n: int, d: int, T, hyper: dict | None = None) -> float:
    """Passes of a run of T updates: first + (T - 1) x per update (0 for T = 0)."""
    if T is None or pd.isna(T):
        return float("nan")
    first, per = pass_equivalents(algorithm, n, d, hyper)
    return 0.0 if T <= 0 else first + (float(T) - 1.0) * per


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
            runtime.append(float("nan") if pd.isna(k) else lone_runtime(costs, ds, ALGORITHMS[m].timed_as, k + 1.0))
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
                    note = one_shot_note(method, measure)
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
