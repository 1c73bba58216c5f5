"""The best-T cells a setting's verdicts read: one row per (dataset, base algorithm, epsilon).

Settings (:mod:`dpnewton.pipeline.claims`): ``a`` (the protocol conversion, default
configurations), ``a-tuned`` (as ``a``, each algorithm's best declared configuration), ``b`` (the
official code's conversion, reusing ``a`` where its rho agrees), ``c`` (tight accounting).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..frontier import hyper_dict
from ...algorithms import ALGORITHMS

GROUP = ["dataset", "algorithm", "conversion", "epsilon"]
SETTINGS = ["a", "a-tuned", "b", "c"]
#: the conversion key ('a', 'b' or 'c' of the claims config) each setting runs under
SETTING_CONVERSION = {"a": "a", "a-tuned": "a", "b": "b", "c": "c"}


def base_of(frame: pd.DataFrame) -> pd.Series:
    """Registered algorithm of each row (``base_algorithm`` column, else the algorithm name)."""
    if "base_algorithm" in frame:
        b = frame["base_algorithm"].astype(str)
        return b.where(b.notna() & (b != "") & (b != "nan"), frame["algorithm"])
    return frame["algorithm"]


def is_reset(frame: pd.DataFrame) -> pd.Series:
    """Rows of configurations that use the official (non-private) explosion reset."""
    if "hyper" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["hyper"].map(lambda h: bool(hyper_dict(h).get("reset", False))).astype(bool)


def is_paper_configuration(frame: pd.DataFrame) -> pd.Series:
    """Rows of the paper's methods (cards with ``paper``: the paper's claims are checked on these alone) at
    their last iterate (no ``average``); the project's own methods and options enter "Beyond the paper" only."""
    paper = [a for a, spec in ALGORITHMS.items() if spec.paper]
    return base_of(frame).isin(paper) & ~is_averaged(frame)


def is_paper_method(name: str) -> bool:
    """Whether the base algorithm ``name`` is one of the paper's methods (its card's ``paper``; False for an
    unregistered name)."""
    spec = ALGORITHMS.get(name)
    return bool(spec is not None and spec.paper)


def by_whose(names) -> dict[str, tuple[str, ...]]:
    """``names`` (base algorithms) split by whose they are: ``{"paper": the paper's methods, "project": this
    project's}`` (the cards' ``paper``), order kept. Every count over a role is given per side."""
    names = tuple(names)
    return {"paper": tuple(n for n in names if is_paper_method(n)),
            "project": tuple(n for n in names if not is_paper_method(n))}


def is_averaged(frame: pd.DataFrame) -> pd.Series:
    """Rows of configurations that release an average of iterates (``average`` != none)."""
    if "hyper" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["hyper"].map(lambda h: hyper_dict(h).get("average", "none") != "none").astype(bool)


def setting_cells(best: pd.DataFrame, setting: str, conv: dict, official_rho=None) -> pd.DataFrame:
    """best-T rows of one setting, one row per (dataset, base algorithm, epsilon).

    ``conv`` maps 'a'/'b'/'c' to conversions. Reset configurations are left out. In 'a', 'b', 'c' only
    the default configuration (name == registered algorithm) counts; in 'a-tuned' the best
    configuration per base algorithm (argmin of best-T mean; non-finite never wins).
    ``official_rho(epsilon, delta) -> rho`` lets 'b' reuse 'a' rows where the two rhos agree.
    """
    b = best.copy()
    b["base"] = base_of(b)
    b = b[~is_reset(b)]
    rows = b[b["conversion"] == conv[SETTING_CONVERSION[setting]]]
    if setting == "b":
        prot = b[b["conversion"] == conv["a"]]
        have = set(zip(rows["dataset"], rows["epsilon"]))
        extra = []
        for _, r in prot.iterrows():
            if (r["dataset"], r["epsilon"]) in have or official_rho is None:
                continue
            if math.isclose(official_rho(float(r["epsilon"]), float(r["delta"])), float(r["rho"]), rel_tol=1e-6):
                extra.append(r)
        if extra:
            rows = pd.concat([rows, pd.DataFrame(extra)], ignore_index=True)
    if setting != "a-tuned":
        rows = rows[rows["algorithm"] == rows["base"]]
    else:
        m = rows["excess_loss_mean"].astype(float)
        rows = rows.assign(_key=np.where(np.isfinite(m), m, np.inf)).sort_values(["_key", "algorithm"])
        rows = rows.drop_duplicates(["dataset", "base", "epsilon"]).drop(columns="_key")
    return rows.sort_values(["dataset", "base", "epsilon"]).reset_index(drop=True)


def cell_row(cells: pd.DataFrame, ds, base, eps):
    """The cell of (dataset, base algorithm, epsilon), None if there is none."""
    r = cells[(cells["dataset"] == ds) & (cells["base"] == base) & np.isclose(cells["epsilon"], eps)]
    return r.iloc[0] if len(r) else None


def cell_value(cells: pd.DataFrame, ds, base, eps, col="excess_loss_mean") -> float:
    """Column ``col`` of a cell (NaN if there is no such cell)."""
    r = cell_row(cells, ds, base, eps)
    return float(r[col]) if r is not None else float("nan")
