"""The claims' checks: the rules the rows of :data:`~.evaluation.CLAIMS` name. ``check(claim, evidence)``
yields one ``(claim name, dataset, Verdict)`` per report row of one setting, reading its
:class:`Evidence` and applying a ``verdict_*`` rule of :mod:`.rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np
import pandas as pd

from .cells import cell_row
from .paper import PaperClaim
from .rules import (verdict_best_loss, verdict_damped, verdict_fig1, verdict_oracle, verdict_oracle_gap, verdict_qu,
                    verdict_qu_speed, verdict_speedup)
from .verdict import NA, Verdict


@dataclass(frozen=True)
class Evidence:
    """What a claim's rule reads in one setting.

    ``cells``: the setting's best-T cells (:func:`~.cells.setting_cells`; held-out cells for a
    held-out claim); ``best``: every best-T cell of the paper's methods; ``curves``: best-T curves
    with ``runtime_s``; ``table1``: the setting's Table 1 cells; ``trivial``: dataset -> excess loss
    of w = 0; the method names come from the config's ``claims`` section.
    """

    setting: str
    conversion: str
    cells: pd.DataFrame
    best: pd.DataFrame
    summary: pd.DataFrame
    curves: pd.DataFrame
    table1: pd.DataFrame
    trivial: dict
    ours: tuple[str, ...]
    baseline: str
    table1_ours: str
    oracle: str
    damped: str

    @property
    def datasets(self) -> list[str]:
        return sorted(self.best["dataset"].unique())

    @property
    def bases(self) -> list[str]:
        """The base algorithms of ``best``."""
        return sorted(self.best["base"].unique())

    @property
    def competitors(self) -> list[str]:
        """The bases that are neither ours nor the Oracle."""
        return [b for b in self.bases if b not in self.ours and b != self.oracle]


VerdictRows = Iterator[tuple[str, str, Verdict]]


def check_best_loss(claim: PaperClaim, ev: Evidence) -> VerdictRows:
    """C1 per dataset (:func:`verdict_best_loss`): ours against every competitor."""
    for ds in ev.datasets:
        yield claim.name(), ds, verdict_best_loss(ev.cells, ds, ev.ours, ev.competitors, ev.trivial.get(ds))


def check_speedup(claim: PaperClaim, ev: Evidence) -> VerdictRows:
    """C2 over all datasets (:func:`verdict_speedup`) on the setting's Table 1 cells, with their
    ``degenerate`` flags (:func:`degenerate_cell`)."""
    t1 = ev.table1
    if len(t1):
        ratios = " ".join(f"{r.dataset}@{r.epsilon:g}:{r.ratio:.1f}x" for r in t1.itertuples())
        yield claim.name(), "all", replace(verdict_speedup(t1["ratio"], t1["degenerate"]), ours=ratios)


def check_fig1(claim: PaperClaim, ev: Evidence) -> VerdictRows:
    """C3 per dataset (:func:`verdict_fig1`) at the claim's ``epsilon``, where both methods have a cell."""
    eps = claim.values["epsilon"]
    cells = ev.cells
    for ds in ev.datasets:
        allb = cells[(cells["dataset"] == ds) & np.isclose(cells["epsilon"], eps)]["excess_loss_mean"].astype(float)
        allb = allb[np.isfinite(allb)]
        g, o = cell_row(cells, ds, ev.baseline, eps), cell_row(cells, ds, ev.table1_ours, eps)
        if g is None or o is None:
            continue
        c = ev.curves
        sub = c[((c["algorithm"] == g["algorithm"]) | (c["algorithm"] == o["algorithm"]))
                & (c["conversion"] == o["conversion"])]
        yield claim.name(), ds, verdict_fig1(sub, ds, eps, o["conversion"], o["algorithm"], g["algorithm"],
                                             float(allb.min()) if len(allb) else float("nan"))


def _oracle_epsilons(ev: Evidence) -> list[float]:
    return [float(e) for e in sorted(ev.best[ev.best["base"] == ev.oracle]["epsilon"].unique())]


def check_oracle(claim: PaperClaim, ev: Evidence) -> VerdictRows:
    """C4 per dataset and epsilon the Oracle ran at (:func:`verdict_oracle`); cells it cannot judge are left out."""
    for ds in ev.datasets:
        for e in _oracle_epsilons(ev):
            res = verdict_oracle(ev.summary, ev.cells, ds, e, ev.ours, ev.oracle)
            if res.verdict != NA:
                yield claim.name(eps=e), ds, res


def check_oracle_gap(claim: PaperClaim, ev: Evidence) -> VerdictRows:
    """C4's "gap grows with epsilon" per dataset (:func:`verdict_oracle_gap`): the largest epsilon the
    Oracle ran at against the smallest; datasets it cannot judge (fewer than two epsilons) are left out."""
    eps = _oracle_epsilons(ev)
    if len(eps) < 2:
        return
    lo, hi = eps[0], eps[-1]
    for ds in ev.datasets:
        res = verdict_oracle_gap(verdict_oracle(ev.summary, ev.cells, ds, lo, ev.ours, ev.oracle),
                                 verdict_oracle(ev.summary, ev.cells, ds, hi, ev.ours, ev.oracle), lo, hi)
        if res.verdict != NA:
            yield claim.name(low=lo, high=hi), ds, res


def check_damped(claim: PaperClaim, ev: Evidence) -> VerdictRows:
    """C5 per dataset (:func:`verdict_damped`): damped Newton against every method but the Oracle."""
    others = [b for b in ev.bases if b != ev.oracle and b != ev.damped]
    for ds in ev.datasets:
        yield claim.name(), ds, verdict_damped(ev.cells, ds, ev.damped, others)


def check_qu_speed(claim: PaperClaim, ev: Evidence) -> VerdictRows:
    """C6 per dataset (:func:`verdict_qu_speed`)."""
    for ds in ev.datasets:
        yield claim.name(), ds, verdict_qu_speed(ev.summary, ev.cells, ds)


def check_qu(claim: PaperClaim, ev: Evidence) -> VerdictRows:
    """C6's best-loss reading per dataset (:func:`verdict_qu`)."""
    for ds in ev.datasets:
        yield claim.name(), ds, verdict_qu(ev.cells, ds)
