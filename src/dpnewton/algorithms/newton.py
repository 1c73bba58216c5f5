"""The Newton iteration shared by the non-private solvers (the optimum w*, AOP's minimiser of J).

:func:`newton_iterate` runs x_{k+1} = x_k - t_k p_k from x_0 and leaves the parts to its callers:

* ``evaluate(x) -> state``: what one pass at x gives (margins, value, gradient, ...);
* ``converged(k, state) -> bool``: the stopping rule, tested at every iterate x_k, k < max_iter,
  before a step (it may record the iterate, e.g. in a solver log);
* ``direction(x, state) -> p``: the Newton direction (pseudo-inverse, Cholesky, ...);
* ``step_length(x, state, p) -> t``: the line search; ``None`` when it finds no step (the run stops);
* ``stalled(state, new_state, t) -> bool`` (optional): tested after each step; True stops the run.

It returns ``(x, state, iterations, converged)``: ``iterations`` is k when the rule held at x_k, and
otherwise the number of iterates the rule was tested at (k + 1 after a failed line search at x_k,
k + 1 after a stall in step k, ``max_iter`` after ``max_iter`` steps); ``converged`` is the rule
at the returned x: ``converged_at_end(state)`` when the loop did not stop by the rule (a caller
whose rule records each iterate passes the rule without the recording).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def newton_iterate(x0: np.ndarray, evaluate: Callable[[np.ndarray], Any],
                   converged: Callable[[int, Any], bool],
                   direction: Callable[[np.ndarray, Any], np.ndarray],
                   step_length: Callable[[np.ndarray, Any, np.ndarray], "float | None"],
                   max_iter: int, converged_at_end: Callable[[Any], bool],
                   stalled: Callable[[Any, Any, float], bool] | None = None
                   ) -> tuple[np.ndarray, Any, int, bool]:
    """Newton's method with a line search (module docstring)."""
    x = x0
    state = evaluate(x)
    for k in range(max_iter):
        if converged(k, state):
            return x, state, k, True
        p = direction(x, state)
        t = step_length(x, state, p)
        if t is None:
            return x, state, k + 1, converged_at_end(state)
        x = x - t * p
        new_state = evaluate(x)
        if stalled is not None and stalled(state, new_state, t):
            return x, new_state, k + 1, converged_at_end(new_state)
        state = new_state
    return x, state, max_iter, converged_at_end(state)
