"""The small-n audit (3 vs 4 rows, the flipped-label canary) of every estimator algorithm: the
estimator's mechanism stays within its claimed epsilon, and the n-dependent noise of the paper's
convention is caught. The full-size run is benchmarks/small_n_audit.py (30,000 fits per side)."""

from __future__ import annotations

import numpy as np
import pytest

from dpnewton.audit.small_n import EPSILON, audit_small_n, flipped_label_pair
from dpnewton.estimator import supported_algorithms


def test_pair_is_the_flipped_label_canary():
    (XD, yD), (XP, yP) = flipped_label_pair()
    assert len(XD) == 3 and len(XP) == 4
    assert np.array_equal(XP[:3], XD) and np.array_equal(yP[:3], yD)
    assert XP[3].tolist() == XD[0].tolist() and yP[3] != yD[0]          # a copy of row 0, label flipped


@pytest.mark.parametrize("algorithm", supported_algorithms())
def test_estimator_mechanisms_within_their_claim(algorithm):
    outcome = audit_small_n(algorithm, "none", trials=3000, pilot=2000, seed=0)
    assert not outcome.violates_claim, outcome.as_dict()


def test_public_n_noise_is_caught():
    """DP-GD with its noise calibrated on the public n (the paper's convention, the estimator's former
    behaviour) leaks the row count: the 95 % lower bound exceeds the claimed epsilon = 2."""
    outcome = audit_small_n("dp-gd", "public-n", trials=30_000, pilot=10_000, seed=0)
    assert outcome.epsilon_lb > EPSILON, outcome.as_dict()
