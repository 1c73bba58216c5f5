"""dpnewton: differentially private second-order convex optimization, reproduced and benchmarked.

Reproduces Ganesh, Haghifam, Steinke & Thakurta, "Faster Differentially Private Convex
Optimization via Second-Order Methods" (NeurIPS 2023).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dpnewton")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0+unknown"

from .api import FitResult, fit  # noqa: E402

__all__ = ["fit", "FitResult", "DPLogisticRegression", "__version__"]


def __getattr__(name):
    """``dpnewton.DPLogisticRegression``, imported on first use (importing scikit-learn takes ~0.5 s)."""
    if name == "DPLogisticRegression":
        from .estimator import DPLogisticRegression  # imported on use: scikit-learn costs ~0.6 s at start-up
        return DPLogisticRegression
    raise AttributeError(f"module 'dpnewton' has no attribute {name!r}")
