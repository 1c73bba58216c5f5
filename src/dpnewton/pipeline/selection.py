"""Best-T selection, the paper's non-private protocol (Section 5): for each (dataset, algorithm
configuration, conversion, epsilon), the T of the grid with the smallest mean excess loss over
seeds. A non-finite mean (a seed diverged) never wins; on ties the smallest T wins."""

from __future__ import annotations

import numpy as np
import pandas as pd


def mean_per_t(frame: pd.DataFrame, value: str = "excess_loss", by: str = "iterations") -> pd.Series:
    """Mean of ``value`` over the rows (seeds) of each T, indexed by T in increasing order. The mean
    is numpy's, so one non-finite seed makes the T's mean non-finite (pandas' mean would skip NaN)."""
    return frame.groupby(by)[value].agg(lambda x: float(np.mean(np.asarray(x, dtype=float))))


def best_t(means: pd.Series) -> int | None:
    """The T (index) of the smallest finite mean; the smallest such T on ties; None if none is finite."""
    m = means[np.isfinite(means.to_numpy(dtype=float))]
    return int(m.sort_index().idxmin()) if len(m) else None
