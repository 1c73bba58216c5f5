"""Which verdicts rest on a grid cap or on timing noise.

Cap check: a best T at its grid cap (``edge == 'high'``) may still be improving; each verdict is
evaluated again with every capped cell continued to its limit (:func:`continued_past_cap`).
Timing check: the runtime verdicts (Table 1 cells, C2, C3) are evaluated again with the baseline's
per-update costs ``claims.timing_tolerance`` (relative) higher and lower (:func:`scaled_costs`). The
default tolerance (the config schema's) is the measured timing noise: three timing stages of
config/claims.yaml within an hour on one idle 2-core VM gave DP-GD / Hess-clip cost ratios 0.206,
0.246 and 0.257 on protein (memory-bound DP-GD and compute-bound Hess-clip react differently to the
host's load).
"""

from __future__ import annotations

import pandas as pd

from .rules import verdict_table1_cell

UNBOUNDED_RUNTIME = 1e6    # runtime factor that stands for "run on without limit" in the cap check
VERDICT_KEY = ["claim", "setting", "dataset"]


def continued_past_cap(cells: pd.DataFrame) -> pd.DataFrame:
    """The extreme continuation of every cell whose best T is at its grid cap (``edge == 'high'``).

    Such a cell's loss could still fall if its grid were extended, and its best T (so its runtime)
    could only grow. The continuation takes both to their limits: mean excess loss and s.e. 0, runtime
    x ``UNBOUNDED_RUNTIME``. A verdict that differs under it rests on a grid cap. The check is exact
    for a verdict whose capped cells all sit on one side of its comparison (all competitors, or all
    ours), because the C1, Table 1, C2, C5 and C6-loss rules are monotone in each cell's loss and runtime.
    C3 reads the stored curves and is not affected; C4 (and its gap) and C6 compare the iterations to a
    level both methods reach, which the continuation moves only when a capped loss is above the other
    method's (indicative there).
    """
    c = cells.copy()
    if "edge" not in c:
        return c
    high = c["edge"].astype(str).eq("high")
    c.loc[high, ["excess_loss_mean", "excess_loss_se"]] = 0.0
    c.loc[high, "runtime_s"] = c.loc[high, "runtime_s"].astype(float) * UNBOUNDED_RUNTIME
    return c


def with_cap_check(verdicts: pd.DataFrame, continued: pd.DataFrame) -> pd.DataFrame:
    """Add ``verdict_past_cap`` (the verdict under :func:`continued_past_cap`) and ``cap_sensitive``."""
    v = verdicts.merge(continued[VERDICT_KEY + ["verdict"]].rename(columns={"verdict": "verdict_past_cap"}),
                       on=VERDICT_KEY, how="left")
    v["verdict_past_cap"] = v["verdict_past_cap"].fillna(v["verdict"])
    v["cap_sensitive"] = v["verdict_past_cap"] != v["verdict"]
    return v


def scaled_costs(costs: pd.DataFrame, base: str, factor: float) -> pd.DataFrame:
    """``costs`` with every configuration of the base algorithm ``base`` ``factor`` times as costly
    (first update and every further one)."""
    c = costs.copy()
    sel = c["base_algorithm"].astype(str) == base
    for col in ("first_update_s", "s_per_update"):
        c.loc[sel, col] = c.loc[sel, col].astype(float) * factor
    return c


def with_timing_check(verdicts: pd.DataFrame, alternatives: list[pd.DataFrame]) -> pd.DataFrame:
    """Add ``verdict_timing`` (the other verdicts reached when the baseline's per-update cost moves by
    the timing tolerance either way; '' if none) and ``timing_sensitive``."""
    v = verdicts.copy()
    others = [[] for _ in range(len(v))]
    for alt in alternatives:
        got = v[VERDICT_KEY].merge(alt[VERDICT_KEY + ["verdict"]], on=VERDICT_KEY, how="left")["verdict"]
        for i, (mine, other) in enumerate(zip(v["verdict"], got)):
            if isinstance(other, str) and other != mine and other not in others[i]:
                others[i].append(other)
    v["verdict_timing"] = [" / ".join(o) for o in others]
    v["timing_sensitive"] = v["verdict_timing"] != ""
    return v


def table1_cell_within_timing(ratio: float, paper: float | None, tol: float) -> str:
    """The other verdicts of a Table 1 cell when its ratio moves by the relative timing tolerance
    either way ('' if none)."""
    mine = verdict_table1_cell(ratio, paper, 0.0, 0.0).verdict
    moved = [verdict_table1_cell(ratio * f, paper, 0.0, 0.0).verdict for f in (1 + tol, 1 / (1 + tol))]
    return " / ".join(dict.fromkeys(m for m in moved if m != mine))
