"""The parameter checks of :class:`dpnewton.DPLogisticRegression`: every parameter is checked (and
the budget split) before any data is read; each error names the problem and the fix."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .algorithms import ALGORITHMS, AlgorithmSpec
from .experiment import validate_iterations
from .privacy.neighbouring import LIBRARY_RELATION


def rejection_reason(spec: AlgorithmSpec) -> str | None:
    """Why ``spec`` cannot back a private estimator; None when it can."""
    if LIBRARY_RELATION not in spec.relations:
        return (f"its noise is calibrated only with n public ({', '.join(spec.relations)}), not for the "
                f"estimator's {LIBRARY_RELATION!r} relation")
    if spec.nonprivate:
        return f"not private: {spec.nonprivate} is computed from the exact data"
    return None


def supported_algorithms() -> tuple[str, ...]:
    """The registry's algorithms a ``DPLogisticRegression`` can use: calibrated for ``add-remove``
    (n private) and private in every step."""
    return tuple(sorted(name for name, spec in ALGORITHMS.items() if rejection_reason(spec) is None))


def check_algorithm(name) -> AlgorithmSpec:
    allowed = ", ".join(supported_algorithms())
    if not isinstance(name, str) or name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {allowed}")
    reason = rejection_reason(ALGORITHMS[name])
    if reason is not None:
        raise ValueError(f"algorithm={name!r} is not supported by DPLogisticRegression ({reason}); "
                         f"choose one of {allowed}")
    return ALGORITHMS[name]


def check_iterations(iterations, spec: AlgorithmSpec) -> int:
    """T: 1 for a one-shot method (it ignores T); an iterative method needs a public T."""
    if not spec.iterative:
        return 1 if iterations is None else validate_iterations(iterations)
    if iterations is None:
        raise ValueError(f"algorithm={spec.name!r} needs iterations (T, chosen without the private data: "
                         "tuning it on them is not covered by the guarantee), e.g. iterations=1000 with "
                         "hyper={'average': 'tail'}")
    return validate_iterations(iterations)


def check_positive(value, name: str, allow_none: bool) -> float | None:
    if value is None and allow_none:
        return None
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
            or value <= 0):
        raise ValueError(f"{name}={value!r} must be {'None or ' if allow_none else ''}a finite number > 0")
    return float(value)


def check_data_norm(data_norm) -> float | None:
    data_norm = check_positive(data_norm, "data_norm", allow_none=True)
    if data_norm is not None and not 1e-150 < data_norm < 1e150:
        raise ValueError(f"data_norm={data_norm!r} is outside [1e-150, 1e150]: the scaled rows or "
                         "weights would overflow; rescale the features")
    return data_norm


def check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={value!r} must be True or False")
    return bool(value)


def check_share(share) -> float:
    if (isinstance(share, bool) or not isinstance(share, numbers.Real) or not math.isfinite(share)
            or not 0.0 < share < 1.0):
        raise ValueError(f"preprocessing_share={share!r} must be a number in (0, 1): the share of (epsilon, "
                         "delta) spent on the private feature ranges (pass bounds= to spend none)")
    return float(share)


def split_budget(total: float, share: float) -> tuple[float, float]:
    """(share x total, the rest), the two summing to at most ``total`` in floating point (basic
    composition never claims more than the user's budget)."""
    part = share * total
    rest = total - part
    while part + rest > total:
        rest = np.nextafter(rest, 0.0)
    return part, float(rest)


__all__ = ["check_algorithm", "check_bool", "check_data_norm", "check_iterations", "check_positive",
           "check_share", "split_budget", "supported_algorithms"]
