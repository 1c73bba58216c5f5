"""The optimizers. Each module registers its algorithms' cards (:mod:`.registry`) when imported; this
package imports them in report order (first-order before second-order within each role), then the
third-party plugins declared in the entry-point group ``dpnewton.algorithms`` (docs/extending.md)."""

from __future__ import annotations

from . import gradient_descent, double_noise, minibatch, cubic_newton  # noqa: F401  (registration order)
from . import precond, damped_newton, aop, objpert  # noqa: F401
from .base import RunContext, RunResult
from .registry import (ALGORITHMS, AUDIT_CANARIES, AUDIT_LEVELS, ENTRY_POINT_GROUP, ROLES, AlgorithmSpec, AuditCase,
                       build_config, configured_nonprivate, costed, get_algorithm, load_plugins, planner, register,
                       runner, with_role, with_train_accuracy)

#: the cards this package registers itself (the generated docs list these; plugins come after them)
BUILT_IN: tuple[str, ...] = tuple(ALGORITHMS)
PLUGINS = load_plugins()

__all__ = ["ALGORITHMS", "AUDIT_CANARIES", "AUDIT_LEVELS", "AlgorithmSpec", "AuditCase", "BUILT_IN",
           "ENTRY_POINT_GROUP", "PLUGINS", "ROLES", "RunContext", "RunResult", "build_config",
           "configured_nonprivate", "costed", "get_algorithm", "planner", "register", "runner", "with_role",
           "with_train_accuracy"]
