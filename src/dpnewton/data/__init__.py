"""Dataset preparation for dpnewton.

>>> from dpnewton.data import prepare, load_prepared, DatasetError, DATASETS
>>> pd = prepare("a1a", data_dir="../shared/datasets")   # doctest: +SKIP
>>> pd.X.shape, pd.y                                      # doctest: +SKIP

``pd.X`` is float64 (n, d) after dataset-specific preprocessing, including the
prepended constant-1 bias column where the dataset has one, and *before* the
per-row unit-ball projection.  ``pd.y`` is float64 in {-1, +1}.
"""

from .errors import DatasetError
from .prepare import PreparedDataset, load_prepared, prepare
from .registry import DATASETS

__all__ = ["DATASETS", "DatasetError", "PreparedDataset", "load_prepared", "prepare"]
