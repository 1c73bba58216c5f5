"""Private softmax regression (dpnewton.multinomial): accounting, sensitivity, gradient, neighbour replay."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import sparse, special

from dpnewton import multinomial
from dpnewton.multinomial import (GRADIENT_SENSITIVITY, METHODS, fit_multinomial, project_rows,
                                  softmax_loss_and_gradient)
from dpnewton.privacy.conversions import epsilon_to_rho

RELEASE = multinomial._release   # the unpatched release (a replay may run twice in one test)


def dataset(n=60, p=5, K=4, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True) * rng.uniform(1.0, 1.5, size=(n, 1))
    labels = rng.integers(0, K, size=n)
    return Z, labels, K


@pytest.mark.parametrize("method", METHODS)
def test_ledger_sums_to_rho_and_record_says_so(method):
    Z, y, K = dataset()
    W, ledger, record = fit_multinomial(Z, y, K, 1.0, 1e-5, np.random.default_rng(1), method=method, iterations=7)
    rho = epsilon_to_rho(1.0, 1e-5)
    assert math.isclose(ledger.spent_rho, rho, rel_tol=1e-12)
    assert record["rho"] == rho and record["ledger_rho_total"] == ledger.spent_rho
    quantities = [e.quantity for e in ledger.entries]
    assert quantities == ["count"] + (["gram"] if method == "bohning" else []) + ["gradient"] * 7
    assert record["n_releases"] == len(quantities) and record["neighbouring"] == "add-remove"
    assert W.shape == (K, Z.shape[1]) and np.allclose(W.sum(axis=0), 0.0)


def test_fit_is_deterministic_given_the_generator():
    Z, y, K = dataset()
    fits = [fit_multinomial(Z, y, K, 1.0, 1e-5, np.random.default_rng(3))[0] for _ in range(2)]
    assert np.array_equal(*fits)


def test_gradient_noise_scale_does_not_grow_with_the_number_of_classes():
    sigmas = []
    for K in (3, 10):
        Z, y, _ = dataset(K=K)
        _, ledger, _ = fit_multinomial(Z, y, K, 1.0, 1e-5, np.random.default_rng(0), method="gd", iterations=5)
        sigmas.append([e.sigma for e in ledger.entries if e.quantity == "gradient"])
    assert sigmas[0] == sigmas[1]


def test_per_row_gradient_norm_is_within_sqrt2():
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(2000):
        K, p = rng.integers(2, 12), rng.integers(1, 8)
        z = rng.standard_normal(p)
        z /= np.linalg.norm(z)
        W = rng.standard_normal((K, p)) * rng.choice([0.1, 1.0, 30.0])
        _, G = softmax_loss_and_gradient(W, z[None, :], rng.integers(0, K, size=1))
        worst = max(worst, float(np.linalg.norm(G)))
    assert worst <= GRADIENT_SENSITIVITY * (1 + 1e-12)
    assert worst > 1.35  # the bound is nearly attained (all mass on one wrong class): not a loose constant


def test_softmax_gradient_matches_finite_differences():
    Z, y, K = dataset(n=20, p=4, K=3)
    W = np.random.default_rng(2).standard_normal((K, 4))
    _, G = softmax_loss_and_gradient(W, Z, y)
    h, numeric = 1e-6, np.empty_like(W)
    for idx in np.ndindex(*W.shape):
        E = np.zeros_like(W)
        E[idx] = h
        numeric[idx] = (softmax_loss_and_gradient(W + E, Z, y)[0] - softmax_loss_and_gradient(W - E, Z, y)[0]) / (2 * h)
    assert np.allclose(G, numeric, rtol=1e-6, atol=1e-7)
    logits = Z @ W.T  # the loss itself against an independent formula
    expected = -np.sum(np.log(special.softmax(logits, axis=1)[np.arange(len(y)), y]))
    assert math.isclose(softmax_loss_and_gradient(W, Z, y)[0], expected, rel_tol=1e-12)


def test_softmax_curvature_is_below_half_the_centring_projector():
    """Böhning's bound behind the step: diag(s) - s s^T <= (1/2)(I - 11^T/K)."""
    rng = np.random.default_rng(0)
    for K in (2, 3, 10):
        C = np.eye(K) - 1.0 / K
        for _ in range(200):
            s = special.softmax(rng.standard_normal(K) * 3)
            assert np.linalg.eigvalsh(0.5 * C - (np.diag(s) - np.outer(s, s))).min() >= -1e-12


def coupled_replay(monkeypatch, D, D_prime, method):
    """Run D, then D' with every release replaced by D's released value (the same history), recording each
    release's (step, quantity, sensitivity, sigma, exact value). Under the same generator both runs must take
    the same control flow, use the same noise scales, and have exact values within the sensitivity; the
    output, a function of the releases, must be identical."""
    original = RELEASE
    runs, forced = [], None

    def release(ledger, step, quantity, value, sensitivity, rho, rng):
        out = original(ledger, step, quantity, value, sensitivity, rho, rng)
        runs[-1].append((step, quantity, sensitivity, ledger.entries[-1].sigma, np.array(value, dtype=float), out))
        return out if forced is None else forced[len(runs[-1]) - 1][-1]

    monkeypatch.setattr(multinomial, "_release", release)
    outputs = []
    for Z, y in (D, D_prime):
        runs.append([])
        outputs.append(fit_multinomial(Z, y, 3, 1.0, 1e-5, np.random.default_rng(11), method=method,
                                       iterations=6)[0])
        forced = runs[0]
    first, second = runs
    assert [r[:4] for r in first] == [r[:4] for r in second], "control flow or noise scales differ"
    for (step, quantity, sensitivity, _, a, _), (*_, b, _) in zip(first, second):
        diff = np.triu(a - b) if quantity == "gram" else a - b
        assert np.linalg.norm(diff) <= sensitivity * (1 + 1e-12), \
            f"{quantity} at step {step} moved by more than {sensitivity}"
    assert np.array_equal(outputs[0], outputs[1]), "the output depends on more than the releases"


def neighbours():
    Z, y, _ = dataset(n=40, p=4, K=3, seed=7)
    z_new = np.array([[3.0, -2.0, 1.0, 0.5]])   # a long row: only the projection keeps it in the unit ball
    return (Z, y), (np.vstack([Z, z_new]), np.append(y, 2))


@pytest.mark.parametrize("method", METHODS)
def test_neighbour_replay_same_flow_same_scales_bounded_change(monkeypatch, method):
    D, D_prime = neighbours()
    coupled_replay(monkeypatch, D, D_prime, method)
    coupled_replay(monkeypatch, D_prime, D, method)   # removal as well as addition


def test_replay_catches_missing_row_projection(monkeypatch):
    monkeypatch.setattr(multinomial, "project_rows", lambda Z, overwrite=False: Z)
    with pytest.raises(AssertionError, match="moved by more than"):
        coupled_replay(monkeypatch, *neighbours(), "gd")


def test_replay_catches_means_over_the_exact_row_count(monkeypatch):
    """Broken: every mean divides by the exact n instead of the released N."""
    rows = {}
    original_project = multinomial.project_rows

    def remember(Z, overwrite=False):
        rows["n"] = len(Z)
        return original_project(Z, overwrite)

    monkeypatch.setattr(multinomial, "project_rows", remember)
    monkeypatch.setattr(multinomial, "row_count", lambda released: float(rows["n"]))
    with pytest.raises(AssertionError, match="depends on more than the releases"):
        coupled_replay(monkeypatch, *neighbours(), "gd")


def test_sparse_rows_give_the_dense_fit():
    Z, y, K = dataset()
    Z[Z < 0] = 0.0
    for method in METHODS:
        fits = [fit_multinomial(rows, y, K, 1.0, 1e-5, np.random.default_rng(4), method=method, iterations=4)[0]
                for rows in (Z, sparse.csr_matrix(Z))]
        assert np.allclose(*fits, rtol=1e-10, atol=1e-12)


def test_rows_are_projected_onto_the_unit_ball():
    Z = np.array([[3.0, 4.0], [0.3, 0.4]])
    assert np.allclose(project_rows(Z), [[0.6, 0.8], [0.3, 0.4]])


@pytest.mark.parametrize("labels, K, match", [
    ([0, 1, 3], 3, "0..K-1"), ([0.0, 1.0, 2.0], 3, "integers"), ([0, 1, 1], 1, "K=1")])
def test_bad_labels_are_refused_with_the_fix(labels, K, match):
    with pytest.raises(ValueError, match=match):
        fit_multinomial(np.zeros((3, 2)), np.array(labels), K, 1.0, 1e-5, np.random.default_rng(0))


@pytest.mark.parametrize("kwargs, match", [({"iterations": 0}, "iterations=0"), ({"iterations": True}, "iterations"),
                                           ({"conversion": "official-fsolve"}, "privacy bug")])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_multinomial(np.zeros((3, 2)), np.array([0, 1, 2]), 3, 1.0, 1e-5, np.random.default_rng(0), **kwargs)


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="choose one of"):
        fit_multinomial(np.zeros((3, 2)), np.array([0, 1, 2]), 3, 1.0, 1e-5, np.random.default_rng(0), method="x")
