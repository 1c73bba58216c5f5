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

__all__ = ["fit", "FitResult", "__version__"]
