"""The likelihood-ratio statistic of the small-n audit (:mod:`.small_n`): log p_D'(r) - log p_D(r).

By Neyman-Pearson a threshold on the log-likelihood ratio of what a fit releases is the most powerful
test of D against D' at every false-positive rate; it is a fixed function of the release, computed
from the pair and the variant's public noise scales, so choosing its threshold on a pilot keeps the
evaluation's bound valid.

zCDP methods (dp-gd, precond-dp-gd): the releases of a run (:func:`release_log_ratios`). Every fit
starts at w0 = -z_c/||z_c|| (z_c the canary's projected row; :class:`.mechanisms.PinnedStartRng`),
the unit start where the canary's gradient -sigma(-<z_c, w0>) z_c is largest (norm sigma(1) = 0.73
for the unit-norm canary). The accounting covers the releases for every start, which is drawn without the data,
so the audit may condition on one. The transcript r is rebuilt from the recorded draws and the
ledger's noise scales: the released count N (``add-remove`` only; N = max(n + s_N xi, 1)),
precond-dp-gd's curvature release (upper triangle of B~ = Z^T Z/(4N) + S) and the first gradient
release g~ = sum_i grad l(w0; z_i)/N + s_g xi. Under hypothesis h (D or D', n_h rows) each release
is Gaussian with the mean and scale the production plan (:attr:`AlgorithmSpec.plan`) gives for the
row count the run uses (N if released, else n_h):

    log p_h(r) = log p_h(N) + sum_q [-||r_q - m_hq||^2/(2 s_hq^2) - dim_q log s_hq] + const,

log p_h(N) = -(N - n_h)^2/(2 s_N^2), or log Phi((1 - n_h)/s_N) at the clip N = 1.

objpert: the released model theta (:func:`objpert_log_ratios`). Its density is that of the perturbed
minimiser [Redberg, Koskela & Wang 2023; :mod:`dpnewton.privacy.objpert_profile`],
log p_h(theta) = -||b_h(theta)||^2/(2 sigma^2) + log det(H_h(theta) + Lambda I) + const, with
b_h(theta) = -sum_{z in D_h} l'(<z, theta>) z - Lambda theta, H_h = sum_{z in D_h} l'' z z^T and the
run's sum-form Lambda and sigma (:func:`~dpnewton.algorithms.objpert.objpert_parameters`; they do
not depend on n). The output noise (sigma_out < 1e-3) is left out of the density.
"""

from __future__ import annotations

import numpy as np
from scipy import special
from threadpoolctl import threadpool_limits

from ..algorithms import get_algorithm
from ..algorithms.objpert import objpert_parameters
from ..algorithms.precond import bohning_bound
from ..experiment import check_ledger, make_contexts, resolve_budget
from ..loss import LogisticProblem
from ..privacy import DEFAULT_CONVERSION
from ..privacy.ledger import gaussian_sigma
from ..privacy.neighbouring import COUNT_SENSITIVITY, count_rho
from .mechanisms import PinnedStartRng

Pair = tuple[LogisticProblem, LogisticProblem]
DATASET = "small-n-audit"


def pinned_start(pair: Pair) -> np.ndarray:
    """w0 = -z_c/||z_c|| for the canary z_c, the last row of D'."""
    z = np.asarray(pair[1].materialise().Z[-1], dtype=np.float64)
    return -z / np.linalg.norm(z)


def _sums(problem: LogisticProblem, w0: np.ndarray) -> dict[str, np.ndarray]:
    """The sums over the rows that the releases divide by N: the gradient at w0 and the upper triangle of
    B (n B = Z^T Z/4)."""
    return {"gradient": problem.n * problem.grad(w0),
            "curvature": problem.n * bohning_bound(problem)[np.triu_indices(problem.d)]}


def unit_scales(algorithm: str, d: int, rho: float) -> dict[str, float]:
    """Noise std of each planned release for one row (:attr:`AlgorithmSpec.plan` at N = 1, the methods'
    budget ``rho``); every sensitivity of these plans is c/N, so a run with N rows uses scale/N."""
    plan = get_algorithm(algorithm).plan({}, 1, d, 1, rho)
    return {r.quantity: gaussian_sigma(r.sensitivity, r.rho) for r in plan.releases}


def _log_densities(problem: LogisticProblem, sums: dict, transcripts: dict, counts: np.ndarray | None,
                   scales: dict, rho: float) -> np.ndarray:
    """log p_h(r) + const per fit under hypothesis ``problem`` (module docstring): ``transcripts`` maps
    a release to its (fits, dim) values, ``counts`` the released N (None: n is public), ``scales``
    :func:`unit_scales` and ``rho`` the run's whole budget."""
    rows = np.full(len(next(iter(transcripts.values()))), float(problem.n)) if counts is None else counts
    out = np.zeros(rows.size)
    for quantity, released in transcripts.items():
        s = scales[quantity] / rows
        z = (released - np.outer(1.0 / rows, sums[quantity])) / s[:, None]
        out -= 0.5 * np.sum(z * z, axis=1) + released.shape[1] * np.log(s)
    if counts is not None:
        s_n = gaussian_sigma(COUNT_SENSITIVITY, count_rho(rho))
        out += np.where(counts <= 1.0, special.log_ndtr((1.0 - problem.n) / s_n),
                        -0.5 * ((counts - problem.n) / s_n) ** 2)
    return out


def release_transcripts(algorithm: str, pair: Pair, side: int, seeds: list, relation: str, epsilon: float,
                        delta: float, conversion: str = DEFAULT_CONVERSION) -> tuple[list, dict, np.ndarray | None]:
    """Fits of ``algorithm`` on ``pair[side]`` (one per seed, start pinned at :func:`pinned_start`) and
    their releases: (results, release -> (fits, dim) values rebuilt as sum/N + sigma xi from the run's
    ledger and recorded draws, released counts N or None when n is public)."""
    problem = pair[side]
    spec = get_algorithm(algorithm)
    if not spec.zcdp:
        raise ValueError(f"{algorithm}: the release transcript covers the zCDP methods; objpert: objpert_log_ratios")
    delta, rho = resolve_budget(epsilon, delta, problem.n, conversion, relation)
    contexts = make_contexts(DATASET, algorithm, epsilon, delta, conversion, rho, [(s, 1) for s in seeds],
                             neighbouring=relation, n=problem.n)
    w0 = pinned_start(pair)
    for ctx in contexts:
        ctx.rng = PinnedStartRng(ctx.rng, w0)
    with threadpool_limits(1):
        results = spec.run(problem, contexts, {})
    sums = _sums(problem, w0)
    released: dict[str, list] = {}
    for ctx, res in zip(contexts, results):
        check_ledger(res)
        entries = [e for e in ctx.ledger.entries if e.quantity != "count"]
        if len(entries) != len(ctx.rng.draws):
            raise RuntimeError(f"{algorithm}: {len(entries)} releases but {len(ctx.rng.draws)} recorded draws")
        rows = ctx.rows(problem)
        for e, xi in zip(entries, ctx.rng.draws):
            released.setdefault(e.quantity, []).append(sums[e.quantity] / rows + e.sigma * np.asarray(xi))
    counts = None if contexts[0].count is None else np.array([ctx.count for ctx in contexts])
    return results, {q: np.stack(v) for q, v in released.items()}, counts


def release_log_ratios(algorithm: str, pair: Pair, side: int, seeds: list, relation: str, epsilon: float,
                       delta: float, conversion: str = DEFAULT_CONVERSION) -> np.ndarray:
    """log p_D'(r) - log p_D(r) of the releases r (:func:`release_transcripts`) of one fit per seed."""
    _, transcripts, counts = release_transcripts(algorithm, pair, side, seeds, relation, epsilon, delta, conversion)
    _, rho = resolve_budget(epsilon, delta, pair[side].n, conversion, relation)
    scales = unit_scales(algorithm, pair[0].d, rho - (0.0 if counts is None else count_rho(rho)))
    w0 = pinned_start(pair)
    D, P = (_log_densities(h, _sums(h, w0), transcripts, counts, scales, rho) for h in pair)
    return P - D


def objective_noise(problem: LogisticProblem, W: np.ndarray, lam: float) -> np.ndarray:
    """b_h(theta) = -sum_{z in D_h} l'(<z, theta>) z - Lambda theta = sum_i sigma(-<z_i, theta>) z_i - Lambda theta
    (sum form) for each row theta of ``W``: the objective noise that makes theta the minimiser on D_h."""
    Z = np.asarray(problem.materialise().Z, dtype=np.float64)
    return special.expit(-(W @ Z.T)) @ Z - lam * W


def _objpert_log_densities(problem: LogisticProblem, W: np.ndarray, lam: float, sigma: float) -> np.ndarray:
    """log p_h(theta) + const per row theta of ``W`` under hypothesis ``problem`` (module docstring)."""
    Z = np.asarray(problem.materialise().Z, dtype=np.float64)
    p = special.expit(W @ Z.T)
    H = np.einsum("fi,ij,ik->fjk", p * (1.0 - p), Z, Z) + lam * np.eye(problem.d)
    b = objective_noise(problem, W, lam)
    return -0.5 * np.sum(b * b, axis=1) / sigma ** 2 + np.linalg.slogdet(H)[1]


def objpert_log_ratios(pair: Pair, W: np.ndarray, epsilon: float, delta: float, relation: str) -> np.ndarray:
    """log p_D'(theta) - log p_D(theta) for each released model theta (row of ``W``) of objpert run at
    (epsilon, delta) under ``relation``."""
    params = objpert_parameters(epsilon, delta, pair[0].n, neighbouring=relation, d=pair[0].d)
    W = np.atleast_2d(np.asarray(W, dtype=np.float64))
    D, P = (_objpert_log_densities(h, W, params["Lambda"], params["sigma"]) for h in pair)
    return P - D


__all__ = ["objective_noise", "objpert_log_ratios", "pinned_start", "release_log_ratios", "release_transcripts",
           "unit_scales"]
