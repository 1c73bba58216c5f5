"""Ties, not winners: per (dataset, epsilon) cell, the set of methods whose loss is not significantly
above the lowest one.

The committed tables hold, per configuration at its best T, the mean excess loss over ``n_seeds`` seeds
and its standard error (best-T table), or over the track's repetitions (track tables). **Tie rule**
(:mod:`dpnewton.pipeline.significance`): a configuration ties with the cell's lowest mean when Welch's
unpaired t-test from the summary statistics gives a two-sided p-value of at least :data:`ALPHA`. The lowest
mean itself is chosen on the same seeds (non-private selection over T and configurations), which biases it
low: a tie set is, if anything, too small.

A method family is a base algorithm, split into its last-iterate and its averaged configurations
(``dp-gd`` and ``dp-gd (avg)``); a family ties when one of its configurations does. Configurations with a
non-private step (the cards' role "non-private step") and the explosion reset are left out, as in
*Beyond the paper*.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..frontier import role
from ..significance import ALPHA, welch_p
from .cells import base_of, is_averaged, is_reset

AVERAGED = " (avg)"


def mark_ties(cell: pd.DataFrame, mean: str = "excess_loss_mean", se: str = "excess_loss_se",
              n: str = "n_seeds") -> pd.DataFrame:
    """One cell's rows with ``ratio`` (mean / the lowest finite mean), ``p_value`` against the lowest and
    ``tied`` (p >= :data:`ALPHA`; the lowest itself included). Rows without a finite mean never tie."""
    m, s = cell[mean].astype(float), cell[se].astype(float).fillna(0.0)
    k = cell[n].astype(float) if n in cell else pd.Series(2.0, index=cell.index)
    ok = np.isfinite(m)
    out = cell.assign(ratio=np.nan, p_value=np.nan, tied=False)
    if not ok.any():
        return out
    top = m[ok].idxmin()
    p = [welch_p(m[top], s[top], k[top], m[i], s[i], k[i]) if ok[i] else np.nan for i in cell.index]
    out["p_value"] = p
    out["ratio"] = m / m[top] if m[top] > 0 else np.where(m == m[top], 1.0, np.inf)
    out["tied"] = ok & (out["p_value"] >= ALPHA)
    return out


def family(frame: pd.DataFrame) -> pd.Series:
    """Each row's method family: its base algorithm, with :data:`AVERAGED` for averaged configurations."""
    return base_of(frame) + np.where(is_averaged(frame), AVERAGED, "")


def private_rows(best: pd.DataFrame, conversion: str) -> pd.DataFrame:
    """The best-T rows at ``conversion`` of private configurations (no non-private step, no reset)."""
    b = best[best["conversion"] == conversion]
    return b[~is_reset(b) & ~base_of(b).map(role).eq("non-private step")]


def config_ties(best: pd.DataFrame, conversion: str) -> pd.DataFrame:
    """Every private configuration of every cell at ``conversion``, marked by :func:`mark_ties`, with its
    ``family``."""
    b = private_rows(best, conversion)
    if not len(b):
        return b.assign(family=[], ratio=[], p_value=[], tied=[])
    parts = [mark_ties(cell) for _, cell in b.groupby(["dataset", "epsilon"], sort=True)]
    out = pd.concat(parts)
    return out.assign(family=family(out))


def family_ties(configs: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, epsilon, family) of :func:`config_ties`: the family's lowest ratio, its configuration,
    and whether any of its configurations ties."""
    rows = []
    for (ds, eps, fam), g in configs.groupby(["dataset", "epsilon", "family"], sort=True):
        r = g["ratio"].astype(float)
        pick = g.loc[r.idxmin()] if np.isfinite(r).any() else g.iloc[0]
        rows.append({"dataset": ds, "epsilon": float(eps), "family": fam, "configuration": pick["algorithm"],
                     "ratio": float(pick["ratio"]), "tied": bool(g["tied"].any())})
    return pd.DataFrame(rows, columns=["dataset", "epsilon", "family", "configuration", "ratio", "tied"])


def tie_sets(configs: pd.DataFrame, by: str = "family") -> dict[tuple[str, float], list[str]]:
    """(dataset, epsilon) -> the names (``by``: family or algorithm) that tie, lowest mean first."""
    out = {}
    for (ds, eps), g in configs.groupby(["dataset", "epsilon"], sort=True):
        t = g[g["tied"]].sort_values("ratio")
        out[(ds, float(eps))] = list(dict.fromkeys(t[by]))
    return out


def tie_counts(sets: dict) -> pd.Series:
    """How many cells each name's tie set membership covers, most first (ties by name)."""
    c = pd.Series([name for names in sets.values() for name in names], dtype=object).value_counts()
    return c.reindex(sorted(c.index, key=lambda k: (-c[k], k)))
