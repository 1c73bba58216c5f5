"""Private softmax regression (dpnewton.multinomial): accounting, sensitivity, gradient. Its same-seed neighbour
replay, with broken variants, is in tests/audit/test_greybox.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import sparse, special

from dpnewton.multinomial import (GRADIENT_SENSITIVITY, METHODS, fit_multinomial, project_rows,
                                  softmax_loss_and_gradient)
from dpnewton.privacy.conversions import epsilon_to_rho

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
