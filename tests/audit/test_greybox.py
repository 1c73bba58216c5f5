"""Grey-box sensitivity audit (dpnewton.audit.greybox, .greybox_softmax, .greybox_preprocessing): every card,
the softmax fit and the private feature ranges on D and on a neighbour D', same seed, D' replaying D's
releases; identical control flow and noise scales, every release's input moved by at most its sensitivity;
the broken variants are caught."""

import math

import numpy as np
import pytest

from dpnewton import multinomial, preprocessing
from dpnewton.algorithms import ALGORITHMS
from dpnewton.audit.greybox import (BENCHMARK_RELATION, GREYBOX_VARIANTS, LIBRARY_RELATION, RecordingLedger,
                                    compare_runs, greybox_audit, greybox_cases, neighbour_pair, run_pair)
from dpnewton.audit.greybox_preprocessing import LAWS, ranges_greybox_audit, ranges_pair
from dpnewton.audit.greybox_softmax import softmax_greybox_audit, softmax_pair
from dpnewton.audit.variants import BROKEN_VARIANTS
from dpnewton.estimator import supported_algorithms
from dpnewton.experiment import run_algorithm
from dpnewton.multinomial import METHODS, fit_multinomial
from dpnewton.preprocessing import DEFAULT_QUANTILES, LAPLACE, RELEASE, PrivateFeatureScaler, release_ranges
from dpnewton.privacy import PrivacyLedger
from dpnewton.seeding import RunIdentity

CASES = [(rel, name, hyper) for rel in (LIBRARY_RELATION, BENCHMARK_RELATION) for name, hyper in greybox_cases(rel)]
IDS = [f"{rel}-{name}-{'-'.join(f'{k}{v}' for k, v in h.items()) or 'default'}" for rel, name, h in CASES]


@pytest.fixture(scope="module")
def reports():
    """Every (relation, card, configuration) x variant, run once for the module (about 3 s)."""
    out = {}
    for rel, name, hyper in CASES:
        for broken in GREYBOX_VARIANTS:
            if broken == "public-n" and rel != LIBRARY_RELATION:
                continue
            out[rel, name, tuple(sorted(hyper.items())), broken] = greybox_audit(name, rel, hyper, broken)
    return out


def test_cases_cover_every_card_and_the_library_relation():
    assert {n for r, n, _ in CASES if r == BENCHMARK_RELATION} == set(ALGORITHMS)
    assert {n for r, n, _ in CASES if r == LIBRARY_RELATION} >= set(supported_algorithms())
    assert {n for r, n, _ in CASES if r == LIBRARY_RELATION} == {
        n for n, s in ALGORITHMS.items() if LIBRARY_RELATION in s.relations}


@pytest.mark.parametrize("rel,name,hyper", CASES, ids=IDS)
def test_correct_mechanism_passes(reports, rel, name, hyper):
    rep = reports[rel, name, tuple(sorted(hyper.items())), "none"]
    assert rep.passed, rep.violations
    assert rep.undeclared == []      # every release states the sensitivity its noise covers
    assert rep.releases > 0


@pytest.mark.parametrize("rel,name", sorted({(r, n) for r, n, _ in CASES}))
def test_the_canary_moves_an_input_near_its_sensitivity(reports, rel, name):
    """Not vacuous: in some configuration (the default one samples the canary in no Poisson batch of the
    minibatch methods) a release's input moves by a large part of its sensitivity."""
    largest = max(rep.largest_ratio for (r, n, _, b), rep in reports.items() if (r, n, b) == (rel, name, "none"))
    assert largest > 0.25


def _caught(reports, rel, name, broken) -> bool:
    return any(not rep.passed for (r, n, _, b), rep in reports.items() if (r, n, b) == (rel, name, broken))


@pytest.mark.parametrize("rel,name", sorted({(r, n) for r, n, _ in CASES}))
def test_broken_variants_are_caught(reports, rel, name):
    caught = {b for b in GREYBOX_VARIANTS if _caught(reports, rel, name, b)}
    assert {"wrong-sensitivity", "tenth-noise"} <= caught
    if rel == LIBRARY_RELATION:
        assert "public-n" in caught      # noise scaled by the exact n of each side
    # half the noise covers half the sensitivity: caught wherever the canary moves an input by more than
    # half of it; not for cubic Newton (the canary moves its model gradients by 0.48 of the bound
    # (L0 + L1 D)/n at the default D = 10) nor AOP (its objective noise covers the replace-one bound 2L,
    # twice the add/remove change <= L)
    assert ("half-noise" in caught) == (name not in ("cubic-newton", "aop"))


def test_public_n_is_caught_by_the_noise_scales(reports):
    for name in supported_algorithms():
        rep = reports[LIBRARY_RELATION, name, (), "public-n"]
        assert any(v.startswith("(ii)") for v in rep.violations), rep.violations


def test_replay_couples_the_neighbour_to_the_released_history():
    pair = neighbour_pair(BENCHMARK_RELATION)
    D, Dp = run_pair(pair, "hess-clip")
    assert [r.quantity for r in D.releases] == [r.quantity for r in Dp.releases]
    for a, b in zip(D.releases, Dp.releases):
        np.testing.assert_allclose(b.released, a.released, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(Dp.w, D.w, rtol=1e-12, atol=1e-15)
    # without the coupling D' sees its own noisy gradient, so the adaptive sensitivity of its direction
    # (||g~||/(4 n lambda^2 - lambda)) differs: the per-release check needs the common history
    D, Dp = run_pair(pair, "hess-clip", coupled=False)
    rep = compare_runs(D, Dp)
    assert any("(ii) direction" in v for v in rep.violations)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_recording_changes_no_number_and_records_every_charge(toy_problem, monkeypatch, name):
    """The hook: a RecordingLedger run is the production run bit for bit, every charged release was drawn
    through draw_noise right after its charge (same quantity, step and sigma), and so was every scale passed
    through noise(): a card that drew by hand would escape the grey-box test and fail here."""
    spec = ALGORITHMS[name]
    rel = spec.relations[0]
    [plain] = run_algorithm(toy_problem, "toy", name, 1.0, [3], 2, neighbouring=rel)

    monkeypatch.setattr("dpnewton.experiment.PrivacyLedger", RecordingLedger)   # the runs' ledger class
    [recorded] = run_algorithm(toy_problem, "toy", name, 1.0, [3], 2, neighbouring=rel)
    np.testing.assert_array_equal(recorded.w, plain.w)
    ledger = recorded.ledger
    assert isinstance(ledger, RecordingLedger) and not isinstance(plain.ledger, RecordingLedger)
    charged = [(e.quantity, e.step, e.sigma) for e in ledger.entries if e.sigma != float("inf")]
    drawn = [(r.quantity, r.step, r.sigma) for r in ledger.releases if r.quantity in {q for q, _, _ in charged}]
    assert drawn == charged
    # a scale calibrated elsewhere (accountant multiplier, objective perturbation) is drawn there too
    assert {q for q, _ in ledger.noised} <= {r.quantity for r in ledger.releases}
    assert ledger.releases, "every card releases something"


def test_draw_noise_is_the_former_draw():
    """PrivacyLedger.draw_noise is sigma * rng.standard_normal(shape), value and sensitivity unread."""
    ledger = PrivacyLedger(1.0)
    for value, size in ((np.zeros(4), None), (3.0, None), (np.zeros((2, 2)), None), (np.zeros((3, 3)), 6)):
        a = ledger.draw_noise("q", value, 0.7, np.random.default_rng(5), size=size)
        shape = np.shape(value) if size is None else size
        b = 0.7 * (np.random.default_rng(5).standard_normal(shape) if shape != () else
                   np.random.default_rng(5).standard_normal())
        np.testing.assert_array_equal(a, b)
        assert type(a) is type(b)


def test_a_different_sequence_of_releases_is_flagged():
    """(i): the run on D' makes one release fewer (T = 2 against T = 3): the sequences differ."""
    pair = neighbour_pair(LIBRARY_RELATION)
    D, _ = run_pair(pair, "dp-gd", iterations=3)
    _, Dp = run_pair(pair, "dp-gd", iterations=2)
    rep = compare_runs(D, Dp)
    assert any(v.startswith("(i) release sequences differ") for v in rep.violations)
    assert any(v.startswith("(i) ledger charges differ") for v in rep.violations)


SOFTMAX_CASES = [(method, removal) for method in METHODS for removal in (False, True)]
SOFTMAX_IDS = [f"softmax-{m}-{'removal' if r else 'addition'}" for m, r in SOFTMAX_CASES]


@pytest.fixture(scope="module")
def softmax_reports():
    """The softmax fit, both methods, the canary added and removed, x every ledger variant (about 0.1 s)."""
    return {(m, r, b): softmax_greybox_audit(m, b, removal=r) for m, r in SOFTMAX_CASES for b in BROKEN_VARIANTS}


@pytest.mark.parametrize("method,removal", SOFTMAX_CASES, ids=SOFTMAX_IDS)
def test_softmax_passes_and_its_canary_nearly_attains_the_gradient_bound(softmax_reports, method, removal):
    rep = softmax_reports[method, removal, "none"]
    assert rep.passed, rep.violations
    assert rep.undeclared == []
    assert rep.releases == 1 + (method == "bohning") + 5    # count, gram, T = 5 gradients
    assert rep.ratios["count"] == 1.0 and rep.ratios.get("gram", 1.0) == 1.0
    # the canary's class loses probability: its gradient moves by more than its first-step 0.58 of sqrt(2)
    assert rep.ratios["gradient"] > 0.9


@pytest.mark.parametrize("method,removal", SOFTMAX_CASES, ids=SOFTMAX_IDS)
def test_softmax_ledger_variants_are_caught(softmax_reports, method, removal):
    for broken in BROKEN_VARIANTS[1:]:
        rep = softmax_reports[method, removal, broken]
        assert any(v.startswith("(iii) gradient") for v in rep.violations), (broken, rep.violations)


def _softmax_violations(method: str) -> list[str]:
    return softmax_greybox_audit(method).violations + softmax_greybox_audit(method, removal=True).violations


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("sensitivity", [1.0, math.sqrt(2.0 / 3.0)], ids=["binary-bound", "per-class-noise"])
def test_softmax_under_declared_gradient_sensitivity_is_caught(monkeypatch, method, sensitivity):
    """Broken: the gradient noise calibrated to 1 (the binary model's bound, forgetting that one row moves
    all K class rows) or to sqrt(2/K) (one class's noise for the whole K x p release, K = 3). Both equal or
    exceed the canary's first-step change sqrt(2/3): caught at the later steps only."""
    monkeypatch.setattr(multinomial, "GRADIENT_SENSITIVITY", sensitivity)
    violations = _softmax_violations(method)
    assert violations and all(v.startswith("(iii) gradient step") for v in violations), violations
    assert not any(v.startswith("(iii) gradient step 1:") for v in violations)


@pytest.mark.parametrize("method", METHODS)
def test_softmax_missing_row_projection_is_caught(monkeypatch, method):
    monkeypatch.setattr(multinomial, "project_rows", lambda Z, overwrite=False: Z)
    violations = _softmax_violations(method)
    assert any(v.startswith("(iii) gradient step 1:") for v in violations), violations
    assert any(v.startswith("(iii) gram") for v in violations) == (method == "bohning")


def test_softmax_means_over_the_exact_row_count_are_caught(monkeypatch):
    """Broken: every mean divides by the exact n instead of the released N: the output reads the data
    beyond the releases, (iv). DP-GD only: in the Böhning step N cancels (G~/N times the inverse of the
    clipped S~/N, clipped at a lambda that is itself / N), so that variant releases nothing more."""
    rows = {}
    project = multinomial.project_rows

    def remember(Z, overwrite=False):
        rows["n"] = len(Z)
        return project(Z, overwrite)

    monkeypatch.setattr(multinomial, "project_rows", remember)
    monkeypatch.setattr(multinomial, "row_count", lambda released: float(rows["n"]))
    assert any(v.startswith("(iv)") for v in _softmax_violations("gd"))


@pytest.mark.parametrize("method", METHODS)
def test_softmax_draws_every_release_through_the_ledger_as_before(method):
    """The hook: a RecordingLedger fit is the production fit bit for bit, each charge is drawn right after it
    (same quantity, step and sigma), and the noise is sigma xi with xi the generator's standard normals in
    release order (count: one value; gram: the p(p+1)/2 upper-triangle values; each gradient: K x p), the
    draw the fit made before it drew through the ledger."""
    Z, y = softmax_pair().D_prime.Z, softmax_pair().D_prime.labels
    W, ledger, _ = fit_multinomial(Z, y, 3, 1.0, 1e-5, np.random.default_rng(7), method=method, iterations=4)
    recorder = RecordingLedger(ledger.budget_rho, LIBRARY_RELATION)
    W_rec, _, _ = fit_multinomial(Z, y, 3, 1.0, 1e-5, np.random.default_rng(7), method=method, iterations=4,
                                  ledger=recorder)
    np.testing.assert_array_equal(W_rec, W)
    assert [(r.quantity, r.step, r.sigma) for r in recorder.releases] == [
        (e.quantity, e.step, e.sigma) for e in ledger.entries]
    rng = np.random.default_rng(7)
    for r in recorder.releases:
        xi = rng.standard_normal(r.value.shape) if r.value.shape else rng.standard_normal()
        np.testing.assert_array_equal(r.noise, r.sigma * xi)


RANGES_CASES = [(law, removal) for law in LAWS for removal in (False, True)]
RANGES_IDS = [f"ranges-{law}-{'removal' if r else 'addition'}" for law, r in RANGES_CASES]


@pytest.mark.parametrize("law,removal", RANGES_CASES, ids=RANGES_IDS)
def test_feature_ranges_pass_with_the_histograms_at_their_sensitivity(law, removal):
    rep = ranges_greybox_audit(law, removal=removal)
    assert rep.passed, rep.violations
    assert rep.undeclared == [] and rep.releases == 1
    assert rep.ratios == {"feature-histograms": pytest.approx(1.0, rel=1e-12)}   # one count in each histogram
    for broken in ("half-noise", "tenth-noise"):   # wrong-sensitivity breaks gradient releases only
        rep = ranges_greybox_audit(law, broken, removal=removal)
        assert [v.split()[0] for v in rep.violations] == ["(iii)"], (broken, rep.violations)


@pytest.mark.parametrize("law", LAWS)
def test_feature_ranges_sensitivity_of_one_histogram_is_caught(monkeypatch, law):
    """Broken: the release calibrated as if a row moved one histogram (sensitivity 1), not one count in
    each of the d: the input moves by sqrt(d) (L2, Gaussian) or d (L1, Laplace) > 1."""
    monkeypatch.setattr(preprocessing, "histogram_sensitivity", lambda d, law: 1.0)
    for removal in (False, True):
        rep = ranges_greybox_audit(law, removal=removal)
        assert [v.split()[0] for v in rep.violations] == ["(iii)"], rep.violations


@pytest.mark.parametrize("law", LAWS)
def test_feature_ranges_reading_the_exact_max_is_caught(monkeypatch, law):
    """Broken: feature 0's upper end read off the data (its exact max), the classic leak: the ranges are
    no longer post-processing of the release, (iv)."""
    seen = {}
    histograms, ranges = preprocessing.feature_histograms, preprocessing.ranges_from_histograms

    def remember(X):
        seen["X"] = X
        return histograms(X)

    def exact_max(noisy, scale, quantiles, law):
        lower, upper = ranges(noisy, scale, quantiles, law)
        upper[0] = seen["X"][:, 0].max()
        return lower, upper

    monkeypatch.setattr(preprocessing, "feature_histograms", remember)
    monkeypatch.setattr(preprocessing, "ranges_from_histograms", exact_max)
    rep = ranges_greybox_audit(law)
    assert [v.split()[0] for v in rep.violations] == ["(iv)"], rep.violations


@pytest.mark.parametrize("law", LAWS)
def test_feature_ranges_are_the_scalers_and_drawn_as_before(law):
    """release_ranges with a RecordingLedger is PrivateFeatureScaler's fit bit for bit, and its noise is the
    former draw: sigma times the standard normals of the scaler's stream (Gaussian), Laplace(0, b) (pure)."""
    X = ranges_pair()[1]
    delta = 0.0 if law == LAPLACE else 1e-5
    scaler = PrivateFeatureScaler(epsilon=1.0, delta=delta, random_state=3).fit(X)
    rng = RunIdentity("user", "private-feature-scaler", 1.0, 3, 1).generator(RELEASE)
    recorder = RecordingLedger(scaler.rho_, LIBRARY_RELATION)
    lower, upper, noisy = release_ranges(X, 1.0, recorder, rng, DEFAULT_QUANTILES, law)
    np.testing.assert_array_equal(noisy, scaler.noisy_histograms_)
    [release] = recorder.releases
    rng = RunIdentity("user", "private-feature-scaler", 1.0, 3, 1).generator(RELEASE)
    expected = (rng.laplace(0.0, release.sigma, noisy.shape) if law == LAPLACE
                else release.sigma * rng.standard_normal(noisy.shape))
    np.testing.assert_array_equal(release.noise, expected)
    assert release.law == law and release.covered == (X.shape[1] if law == LAPLACE else math.sqrt(X.shape[1]))
