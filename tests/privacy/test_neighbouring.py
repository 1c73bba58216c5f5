"""The neighbouring relations: the library's add-remove (n private, released count) against the
paper's add-remove-public-n, checked on the ledgers and noise scales the runs really use."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpnewton.algorithms import ALGORITHMS
from dpnewton.algorithms.objpert import objpert_parameters
from dpnewton.experiment import make_contexts, resolve_budget, run_algorithm
from dpnewton.loss import LogisticProblem
from dpnewton.privacy.neighbouring import (BENCHMARK_RELATION, COUNT_SHARE, LIBRARY_DELTA, LIBRARY_MAX_ROWS,
                                           LIBRARY_RELATION, check_delta_for_rows, check_relation, default_delta)

LIBRARY_ZCDP = sorted(name for name, spec in ALGORITHMS.items()
                      if LIBRARY_RELATION in spec.relations and spec.plan is not None)
# n-free part of every planned sensitivity: sensitivity x N for the quantities with a fixed bound
N_FREE_SENSITIVITY = {"count": None, "gradient": 1.0, "curvature": 0.25, "trace": 0.25}


def problems(n: int, d: int = 3, seed: int = 0) -> LogisticProblem:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return LogisticProblem.from_xy(X / 3.0, np.where(rng.random(n) < 0.5, 1.0, -1.0))


def test_relations_and_default_delta():
    assert check_relation(LIBRARY_RELATION) == "add-remove"
    with pytest.raises(ValueError, match="neighbouring='replace-one' is unknown"):
        check_relation("replace-one")
    assert default_delta(LIBRARY_RELATION, 10) == LIBRARY_DELTA == 1e-10     # no n in it
    assert LIBRARY_DELTA <= 1 / (10 * LIBRARY_MAX_ROWS)                      # valid up to 10^9 rows
    assert default_delta(BENCHMARK_RELATION, 10) == 1e-2                     # n^-2 [P section 6]
    check_delta_for_rows(0.09, 10, BENCHMARK_RELATION)
    with pytest.raises(ValueError, match="delta=0.1 is at least 1/n = 0.1 for n=10 rows") as err:
        check_delta_for_rows(0.1, 10, BENCHMARK_RELATION)
    assert "n^-2 = 0.01" in str(err.value)                                   # suggests an accepted value
    check_delta_for_rows(0.1, 10, LIBRARY_RELATION)                          # n private: never read


def test_library_delta_check_reads_no_n():
    """Under add-remove the outcome of a fit never depends on whether n >= 1/delta: the same delta
    passes at 99,999 and 100,000 rows (the refusal was a membership test on the private n)."""
    for n in (99_999, 100_000, 10**9):
        check_delta_for_rows(1e-5, n, LIBRARY_RELATION)


@pytest.mark.parametrize("algorithm", LIBRARY_ZCDP)
def test_count_release_and_n_free_sensitivities(algorithm):
    """Under add-remove a zCDP run releases N with sensitivity 1 from COUNT_SHARE of rho, and every
    later planned sensitivity is its n-free constant over N, the released count (never n)."""
    problem = problems(50)
    (res,) = run_algorithm(problem, "toy", algorithm, 1.0, [3], [4], delta=1e-5, neighbouring=LIBRARY_RELATION)
    ledger = res.ledger
    rho = resolve_budget(1.0, 1e-5, 50, "bs16", LIBRARY_RELATION)[1]
    count = ledger.entries[0]
    assert (count.quantity, count.sensitivity) == ("count", 1.0)
    assert math.isclose(count.rho, COUNT_SHARE * rho, rel_tol=1e-12)
    assert math.isclose(ledger.spent_rho, rho, rel_tol=1e-9) and ledger.neighbouring == LIBRARY_RELATION
    N = _released_count(problem, algorithm)
    assert N != 50
    for entry in ledger.entries[1:]:
        constant = N_FREE_SENSITIVITY.get(entry.quantity)
        if constant is not None:
            assert math.isclose(entry.sensitivity * N, constant, rel_tol=1e-12), entry


def _released_count(problem: LogisticProblem, algorithm: str) -> float:
    """The count a seed-3, T = 4 run releases (its "count" stream), rebuilt through make_contexts."""
    rho = resolve_budget(1.0, 1e-5, problem.n, "bs16", LIBRARY_RELATION)[1]
    (ctx,) = make_contexts("toy", algorithm, 1.0, 1e-5, "bs16", rho, [(3, 4)], neighbouring=LIBRARY_RELATION,
                           n=problem.n)
    return ctx.count


def test_released_count_is_the_gaussian_mechanism_on_n():
    """The same seed on n and n + 1 rows: the two counts differ by exactly the sensitivity 1 (one noise
    draw, from the run's own "count" stream), and the runs' gradient noise scales are 1/N each."""
    rho = resolve_budget(1.0, 1e-5, 1000, "bs16", LIBRARY_RELATION)[1]
    (a,) = make_contexts("toy", "dp-gd", 1.0, 1e-5, "bs16", rho, [(0, 5)], neighbouring=LIBRARY_RELATION, n=1000)
    (b,) = make_contexts("toy", "dp-gd", 1.0, 1e-5, "bs16", rho, [(0, 5)], neighbouring=LIBRARY_RELATION, n=1001)
    assert b.count - a.count == pytest.approx(1.0, abs=1e-9)
    assert math.isclose(a.rho, (1 - COUNT_SHARE) * rho, rel_tol=1e-12)


def test_benchmark_relation_keeps_n_and_the_paper_bits():
    """add-remove-public-n: no count release, sensitivities over n, and the run is the one the
    benchmark has always made (run_algorithm's default relation)."""
    problem = problems(40)
    (paper,) = run_algorithm(problem, "toy", "dp-gd", 1.0, [1], [3], neighbouring=BENCHMARK_RELATION)
    (default,) = run_algorithm(problem, "toy", "dp-gd", 1.0, [1], [3])
    assert np.array_equal(paper.w, default.w)
    assert [e.quantity for e in paper.ledger.entries] == ["gradient"] * 3
    assert all(math.isclose(e.sensitivity, 1 / 40) for e in paper.ledger.entries)
    assert paper.ledger.neighbouring == BENCHMARK_RELATION


def test_objpert_noise_scales_do_not_read_n_under_add_remove():
    small, large = (objpert_parameters(1.0, 1e-5, n, neighbouring=LIBRARY_RELATION, d=3) for n in (3, 4))
    assert small["sigma"] == large["sigma"] and small["sigma_out"] == large["sigma_out"]
    paper_small, paper_large = (objpert_parameters(1.0, 1e-5, n, d=3) for n in (3, 4))
    assert paper_small["sigma_out"] != paper_large["sigma_out"]        # (2n + 1) gamma / Lambda
    assert paper_small["sigma"] == small["sigma"]                      # the objective noise is n-free in both


def test_paper_only_methods_refuse_add_remove():
    only_paper = sorted(name for name, spec in ALGORITHMS.items() if LIBRARY_RELATION not in spec.relations)
    assert "cubic-newton" in only_paper
    for name in only_paper:
        with pytest.raises(ValueError, match="calibrated only for neighbouring=add-remove-public-n"):
            run_algorithm(problems(20), "toy", name, 1.0, [0], [2], neighbouring=LIBRARY_RELATION)
