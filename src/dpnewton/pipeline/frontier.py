"""Compute-budget frontier: the best mean excess loss each method reaches within a budget.

For each (dataset, conversion, epsilon, method) and each budget B of a log grid, the frontier is the
smallest mean excess loss over seeds (the summary table's ``excess_loss_mean``) over every declared
configuration of the method (a *method* is a base algorithm; its configurations are the config's
algorithm entries with that base, e.g. tuned variants) and every T of the grid whose cost fits in
B (cost <= B). A non-finite mean never wins; on equal means the cheaper (configuration, T) wins,
then the configuration name. A budget below every cost gives NaN. Selecting T and the
configuration by the true loss is **non-private** (as the paper's best-T protocol). Each frontier point
carries the standard error and the seed count of its (configuration, T) (the summary's
``excess_loss_se`` and ``n_seeds``), for the tie rule of :func:`crossover`.

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
budgets where a private second-order method is significantly best, those where second and first order
tie within seed noise (the tie rule, :mod:`dpnewton.pipeline.significance`), those where a first-order
method is significantly best, and the crossover: the first budget where it becomes so.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ..algorithms import ALGORITHMS, get_algorithm, with_role
from ..algorithms.costs import solve_passes
from .significance import ALPHA, welch_p
from .timing import lone_runtime

MEASURES = ("runtime_s", "passes")
MEASURE_LABELS = {"runtime_s": "runtime", "passes": "gradient passes"}
N_BUDGETS = 13
LONG_COLUMNS = ["dataset", "conversion", "epsilon", "measure", "budget_index", "budget", "method", "role",
                "best_excess_loss", "best_excess_loss_se", "best_n_seeds", "best_algorithm", "best_T", "best_cost",
                "configurations", "costed", "note"]
#: the written table's columns per measure (its runtime columns all start with ``runtime_``: they are
#: timings, not bit-reproducible, unlike everything else in the table)
PREFIX = {"passes": "passes_", "runtime_s": "runtime_"}
PER_MEASURE = ["budget", "best_excess_loss", "best_excess_loss_se", "best_n_seeds", "best_algorithm", "best_T",
               "best_cost", "costed", "note"]
#: what a frontier point is tested with (:func:`crossover`); a table written before it carried them has none
SPREAD = ["best_excess_loss_se", "best_n_seeds"]
KEYS = ["dataset", "conversion", "epsilon", "method", "role", "configurations", "budget_index"]
COLUMNS = KEYS + [PREFIX[m] + c for m in ("passes", "runtime_s") for c in PER_MEASURE]
CELL = ["dataset", "conversion", "epsilon", "measure"]
#: the candidates of the winner by compute budget, by role (:func:`crossover`)
CANDIDATES = ("second-order", "first-order")
OUTCOME_COLUMNS = CELL + ["budget_index", "budget", "leader", "leader_role", "rival", "p_value", "outcome", "tested"]
CROSSOVER_COLUMNS = CELL + ["budgets", "second_order_budgets", "tied_budgets", "first_order_budgets", "tested_budgets",
                            "untested_budgets", "second_order_from", "second_order_to", "second_order_winner",
                            "tied_from", "tied_to", "crossover_budget", "first_order_winner", "note"]


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
    mean, smallest mean; ties -> smaller cost, then configuration name, then smaller T. With its s.e.
    and seed count (``excess_loss_se``, ``n_seeds``; NaN / NA when the summary has none)."""
    cost = group[measure].to_numpy(dtype=float)
    mean = group["excess_loss_mean"].to_numpy(dtype=float)
    ok = np.isfinite(cost) & (cost <= budget) & np.isfinite(mean)
    if not ok.any():
        return {"best_excess_loss": float("nan"), "best_excess_loss_se": float("nan"), "best_n_seeds": pd.NA,
                "best_algorithm": "", "best_T": pd.NA, "best_cost": float("nan")}
    g = group[ok].assign(_cost=cost[ok], _mean=mean[ok]).sort_values(["_mean", "_cost", "algorithm", "iterations"])
    r = g.iloc[0]
    n = r.get("n_seeds", pd.NA)
    return {"best_excess_loss": float(r["_mean"]), "best_excess_loss_se": float(r.get("excess_loss_se", np.nan)),
            "best_n_seeds": pd.NA if pd.isna(n) else int(n), "best_algorithm": str(r["algorithm"]),
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
    for c in ("best_T", "best_n_seeds"):
        out[c] = out[c].astype("Int64")
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
        for c in ("best_T", "best_n_seeds"):
            out[PREFIX[m] + c] = out[PREFIX[m] + c].astype("Int64")
    return out


def to_long(table: pd.DataFrame) -> pd.DataFrame:
    """The written table (COLUMNS) -> long form (LONG_COLUMNS). A table written before the frontier carried
    :data:`SPREAD` (the s.e. and seed count) reads with them NaN: :func:`crossover` leaves it untested."""
    parts = []
    for m in MEASURES:
        x = table.reindex(columns=KEYS + [PREFIX[m] + c for c in PER_MEASURE])
        parts.append(x.rename(columns={PREFIX[m] + c: c for c in PER_MEASURE}).assign(measure=m))
    return pd.concat(parts, ignore_index=True)[LONG_COLUMNS]


def _number(x) -> float:
    return float("nan") if x is None or pd.isna(x) else float(x)


def _p_value(lead, rival) -> float:
    """Welch's p-value (:func:`~dpnewton.pipeline.significance.welch_p`) of two frontier points; NaN when
    either lacks a finite s.e. or has fewer than two seeds (untested)."""
    se = np.array([_number(r.get("best_excess_loss_se")) for r in (lead, rival)])
    n = np.array([_number(r.get("best_n_seeds")) for r in (lead, rival)])
    if not (np.isfinite(se).all() and np.isfinite(n).all() and n.min() >= 2):
        return float("nan")
    return welch_p(float(lead["best_excess_loss"]), se[0], n[0], float(rival["best_excess_loss"]), se[1], n[1])


def budget_outcome(points: pd.DataFrame) -> dict:
    """One budget of one cell (``points``: the candidates' frontier rows at that budget): who is best.

    The leader is the candidate with the lowest finite mean (on an exact tie the first-order method, the
    simpler, then the method name); the rival is the lowest of the other role. ``outcome``: the leader's
    role when its mean is significantly below the rival's (Welch p < :data:`ALPHA`) or the other role has
    no finite loss within the budget; "tie" when p >= ALPHA (an exact tie of means gives p = 1); "" when
    no candidate has a finite loss. ``tested`` is False when the test was needed but a point lacks its
    s.e. or seed count: the outcome is then the leader's role by the lowest mean alone, untested."""
    v = points["best_excess_loss"].to_numpy(dtype=float)
    fin = points[np.isfinite(v)]
    none = {"leader": "", "leader_role": "", "rival": "", "p_value": float("nan"), "outcome": "", "tested": True}
    if not len(fin):
        return none
    ranked = fin.assign(_first=(fin["role"] != "first-order").astype(int))
    ranked = ranked.sort_values(["best_excess_loss", "_first", "method"])
    lead = ranked.iloc[0]
    out = {**none, "leader": lead["method"], "leader_role": lead["role"], "outcome": lead["role"]}
    others = ranked[ranked["role"] != lead["role"]]
    if not len(others):
        return out
    p = _p_value(lead, others.iloc[0])
    out.update(rival=others.iloc[0]["method"], p_value=p, tested=math.isfinite(p))
    if math.isfinite(p) and p >= ALPHA:
        out["outcome"] = "tie"
    return out


def budget_outcomes(frontier: pd.DataFrame) -> pd.DataFrame:
    """:func:`budget_outcome` at every budget of every (dataset, conversion, epsilon, measure) of a long
    frontier (OUTCOME_COLUMNS), over the candidates: the roles :data:`CANDIDATES` (methods with a
    non-private step and the one-shot methods are not candidates; :data:`dpnewton.algorithms.ROLES`)."""
    cand = frontier[frontier["role"].isin(CANDIDATES)]
    rows = [{**dict(zip(CELL + ["budget_index", "budget"], key)), **budget_outcome(g)}
            for key, g in cand.groupby(CELL + ["budget_index", "budget"], sort=True)]
    return pd.DataFrame(rows, columns=OUTCOME_COLUMNS)


def _span(budgets) -> tuple[float, float]:
    b = list(budgets)
    return (b[0], b[-1]) if b else (np.nan, np.nan)


def cell_crossover(outcomes: pd.DataFrame) -> dict:
    """One cell's crossover row (CROSSOVER_COLUMNS but the cell's keys) from its :func:`budget_outcomes`:
    how many budgets each outcome has, and how many were tested (a p-value computed) or untested; the
    first and last budget where second order is significantly best (its winner at the first) and where
    the roles tie; ``crossover_budget``: the first budget above the first where second order is best or
    ties at which first order is significantly best, with its winner (NaN if none)."""
    o = outcomes.sort_values("budget")
    won, tied, first = (o[o["outcome"] == k] for k in ("second-order", "tie", "first-order"))
    level = o[o["outcome"].isin(["second-order", "tie"])]["budget"]
    after = first[first["budget"] > level.iloc[0]] if len(level) else first.iloc[:0]
    return {"budgets": len(o), "second_order_budgets": len(won), "tied_budgets": len(tied),
            "first_order_budgets": len(first), "tested_budgets": int(np.isfinite(o["p_value"].astype(float)).sum()),
            "untested_budgets": int((~o["tested"].astype(bool)).sum()),
            **dict(zip(["second_order_from", "second_order_to"], _span(won["budget"]))),
            "second_order_winner": won["leader"].iloc[0] if len(won) else "",
            **dict(zip(["tied_from", "tied_to"], _span(tied["budget"]))),
            "crossover_budget": after["budget"].iloc[0] if len(after) else np.nan,
            "first_order_winner": after["leader"].iloc[0] if len(after) else "",
            "note": "no method has a finite loss within any budget" if (o["outcome"] == "").all() else ""}


def crossover_of(outcomes: pd.DataFrame) -> pd.DataFrame:
    """The crossover table (CROSSOVER_COLUMNS) of :func:`budget_outcomes`: :func:`cell_crossover` per cell."""
    rows = [{**dict(zip(CELL, key)), **cell_crossover(g)} for key, g in outcomes.groupby(CELL, sort=True)]
    return pd.DataFrame(rows, columns=CROSSOVER_COLUMNS)


def untested(row) -> bool:
    """A crossover row read by the lowest mean alone: some budget needed the test and none could have it."""
    return not row["tested_budgets"] and bool(row["untested_budgets"])


def crossover(frontier: pd.DataFrame) -> pd.DataFrame:
    """Winner by budget (CROSSOVER_COLUMNS), per (dataset, conversion, epsilon, measure) of a long frontier.

    **Rule**: at each budget, the candidate with the lowest mean is significantly best when Welch's test
    against the lowest mean of the other role (second order against first order) gives p < :data:`ALPHA`
    (the tie rule, :mod:`dpnewton.pipeline.significance`), and the two roles tie otherwise: a tie is no
    role's win (:func:`budget_outcome`). Where the frontier has no s.e. or seed count (a table written
    before it carried them) a budget is untested and read by the lowest mean alone (an exact tie goes to
    the first-order method). Per cell: the counts of second-order wins, ties and first-order wins, their
    spans, and the crossover: where first order becomes significantly best (:func:`cell_crossover`).
    """
    return crossover_of(budget_outcomes(frontier))


def dims_from_baseline(baseline: pd.DataFrame) -> dict:
    """{dataset: (n, d)} from the baseline table (the training split's n with a holdout)."""
    if "n" not in baseline or "d" not in baseline:
        return {}
    return {r.dataset: (int(r.n), int(r.d)) for r in baseline.itertuples()
            if pd.notna(r.n) and pd.notna(r.d)}
