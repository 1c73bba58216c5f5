"""Grey-box sensitivity audit: every noisy release of a run on D and on a neighbour D', same seed, coupled.

Where the black-box audit (:mod:`.mechanisms`) tests outputs statistically, this test reads each release's
un-noised input and checks the privacy analysis step by step [docs/privacy_audit.md, "Grey-box sensitivity
test"]:

* **Record.** Every optimizer draws the noise of each release through
  :meth:`~dpnewton.privacy.PrivacyLedger.draw_noise` (the value it is about to release, its noise scale,
  the generator). :class:`RecordingLedger` keeps, per release, its quantity, step, noise scale, declared
  L2 sensitivity and input; production ledgers read none of it (bit-identical runs).
* **Replay (coupling).** D' runs with the same seed, and each release returns D's released value
  (D's input plus D's noise: the coupled noise is D's released value minus D''s input), after drawing from
  the generator as production does, so the random stream stays aligned. Every later step of D' then sees
  the history D saw: the same released gradients, count, traces, curvature, so the same iterates, lambdas
  and adaptive sensitivities. This is the adaptive-composition argument made concrete: each release is a
  Gaussian mechanism *given the released history*, so its input may move by at most its sensitivity
  between D and D' at the same history.
* **Checks** (:func:`compare_runs`): (i) the same sequence of releases (quantity, step), of ledger
  charges and of scales passed through :meth:`~dpnewton.privacy.PrivacyLedger.noise`; (ii) every noise
  scale, charged sensitivity and rho identical (relative 1e-9: the coupled history differs from D's by
  rounding); (iii) every release's input moved by at most the sensitivity its noise covers (declared
  sensitivity x the variant's noise factor, :func:`.variants.noise_factor`; L2 norm of the flattened
  input, so Frobenius for a matrix; L1 for a :data:`~dpnewton.privacy.ledger.LAPLACE` release), relative
  slack 1e-9. (iv), for a mechanism whose output is a function of its releases alone
  (:func:`check_post_processing`): the output is the same on both sides (relative 1e-9).
* **Objective perturbation** (a ledger with an :class:`~dpnewton.privacy.ObjectivePerturbationEvent`):
  the data enter after the noise b (a release of the linear term, input 0), through the minimiser, so its
  objective release is checked by the coupling of its analysis instead: the noise that makes D's
  perturbed minimiser t (the input of the output release) stationary for D' differs from D's by
  sum_{D'} grad l(t) - sum_D grad l(t) (sum form, the regulariser cancels), which must be at most the
  sensitivity the objective noise covers; its mean-form scale and sensitivity (b/n) are compared in sum
  form (x the run's rows; J_D/n has J_D's minimiser). Its output release
  is compared by (i) and (ii) only: its sensitivity holds given the released minimiser, which a same-seed
  replay of the solver does not reproduce.

Neighbours (:func:`neighbour_pair`): ``add-remove`` (the library's relation, n private): D' = D plus the
canary row, each side releasing its own noisy count first (the count's input moves by exactly 1);
``add-remove-public-n`` (the benchmark's, n public): the canary row replaced by a zero row (zero-out
neighbours: n is the same on both sides, and a zero row adds nothing to any gradient, SOI or batch sum, so
it is the canary's removal with the public n kept; run with each side's own n, the scales differ by
construction, the relation's stated caveat). The canary is z_c = +u against rows -u and a few
random rows, from the pinned start w0 = -0.6 u + 0.8 e_2 (its gradient is sigma(0.6) = 0.65 of the
gradient sensitivity, its Hessian weight 0.91 of the trace's and u u^T the whole curvature sensitivity).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ..algorithms import ALGORITHMS, RunContext, get_algorithm
from ..experiment import make_contexts, release_count
from ..loss import LogisticProblem
from ..privacy import PrivacyLedger, epsilon_to_rho
from ..privacy.conversions import pure_rho
from ..privacy.ledger import GAUSSIAN, LAPLACE, ObjectivePerturbationEvent
from ..privacy.neighbouring import BENCHMARK_RELATION, LIBRARY_RELATION, check_relation
from ..seeding import RunIdentity
from .canaries import PinnedStartRng
from .variants import BROKEN_VARIANTS, AuditLedger, noise_factor

#: the grey-box variants: the black-box audit's noise factors, and ``public-n`` (add-remove only: no count
#: release, every scale from the exact n of each side, the paper's convention used where n is private)
GREYBOX_VARIANTS = BROKEN_VARIANTS + ("public-n",)
RELATIVE_SLACK = 1e-9
ABSOLUTE_SLACK = 1e-12


@dataclass(frozen=True)
class Release:
    """One noisy release: input ``value``, the ``noise`` added (on a replay: the coupled noise), the noise
    scale ``sigma``, the sensitivity it covers (declared x the variant's factor; None: not declared) and
    the noise ``law`` (:meth:`~dpnewton.privacy.PrivacyLedger.draw_noise`)."""

    quantity: str
    step: int
    sigma: float
    covered: float | None
    value: np.ndarray
    noise: np.ndarray
    law: str = GAUSSIAN

    @property
    def norm_order(self) -> int:
        """The norm the sensitivity is stated in: L1 for the Laplace mechanism, else L2."""
        return 1 if self.law == LAPLACE else 2

    @property
    def released(self) -> np.ndarray:
        return self.value + self.noise


class RecordingLedger(AuditLedger):
    """An :class:`~.variants.AuditLedger` that records every release drawn through :meth:`draw_noise`;
    with ``replay`` (the releases of the run on D) it returns the coupled noise of the module docstring."""

    def __init__(self, budget_rho: float, neighbouring: str = BENCHMARK_RELATION, broken: str = "none",
                 replay: list[Release] | None = None):
        super().__init__(budget_rho, "none" if broken == "public-n" else broken)
        self.neighbouring = check_relation(neighbouring)
        self.replay = replay
        self.releases: list[Release] = []

    def draw_noise(self, quantity, value, sigma, rng, sensitivity=None, size=None, law=GAUSSIAN):
        noise = PrivacyLedger.draw_noise(self, quantity, value, sigma, rng, sensitivity, size, law)
        entry = self.entries[-1] if self.entries and self.entries[-1].quantity == quantity else None
        declared = sensitivity if sensitivity is not None else (entry.sensitivity if entry is not None else None)
        covered = None if declared is None else declared * noise_factor(self.broken, quantity)
        step = entry.step if entry is not None else sum(r.quantity == quantity for r in self.releases)
        value = np.array(value, dtype=np.float64)
        k = len(self.releases)
        if self.replay is not None and k < len(self.replay):
            target = self.replay[k]
            if target.quantity == quantity and target.value.shape == value.shape:
                noise = target.released - value
                noise = float(noise) if noise.ndim == 0 else noise
        self.releases.append(Release(quantity, int(step), float(sigma), covered, value, np.array(noise), law))
        return noise


@dataclass(frozen=True)
class NeighbourPair:
    D: LogisticProblem
    D_prime: LogisticProblem
    relation: str
    w0: np.ndarray
    canary: np.ndarray


def neighbour_pair(relation: str, n: int = 30, d: int = 3, random_rows: int = 6, seed: int = 0) -> NeighbourPair:
    """D and D' under ``relation`` (module docstring): n - ``random_rows`` rows -u, ``random_rows`` random
    rows of norm <= 1, and the canary +u (u = e_1)."""
    if n <= random_rows or d < 2:
        raise ValueError(f"need n > random_rows and d >= 2; got n={n}, random_rows={random_rows}, d={d}")
    u = np.zeros(d)
    u[0] = 1.0
    X = np.random.default_rng([seed, 17]).standard_normal((random_rows, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    rows = np.vstack([np.tile(-u, (n - random_rows, 1)), X])
    w0 = np.zeros(d)
    w0[0], w0[1] = -0.6, 0.8
    if check_relation(relation) == LIBRARY_RELATION:
        D, D_prime = rows, np.vstack([rows, u])
    else:
        D, D_prime = np.vstack([rows, u]), np.vstack([rows, np.zeros(d)])
    return NeighbourPair(LogisticProblem(D, "greybox-D"), LogisticProblem(D_prime, "greybox-D'"), relation, w0, u)


@dataclass
class SideRun:
    """What one side recorded: releases, ledger entries, scales passed through ``noise`` and the ledger;
    ``problem``: the rows it ran on (a card's :class:`~dpnewton.loss.LogisticProblem`, whose n objective
    perturbation's check reads), ``w`` its output."""

    problem: object
    ledger: RecordingLedger
    w: np.ndarray

    @property
    def releases(self) -> list[Release]:
        return self.ledger.releases


def _context(problem: LogisticProblem, algorithm: str, relation: str, epsilon: float, delta: float,
             iterations: int, seed: int, broken: str, pin: np.ndarray | None, replay) -> RunContext:
    """A run's context as :func:`~dpnewton.experiment.make_contexts` builds it (the count released where it
    releases one), with a :class:`RecordingLedger` and, for an iterative card, the start pinned to ``pin``."""
    rho = pure_rho(epsilon) if delta == 0 else epsilon_to_rho(epsilon, delta, "gdp")
    ident = RunIdentity("greybox", algorithm, float(epsilon), seed, iterations)   # one identity: the same streams
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 29])))
    ledger = RecordingLedger(rho, BENCHMARK_RELATION if broken == "public-n" else relation, broken, replay)
    ctx = RunContext(ident, float(epsilon), float(delta), "gdp", rho, ledger, PinnedStartRng(rng, pin))
    if relation == LIBRARY_RELATION and broken != "public-n":
        probe = make_contexts("greybox", algorithm, epsilon, delta, "gdp", rho, [(seed, iterations)],
                              neighbouring=relation, n=problem.n)[0]
        if probe.count is not None:      # the card releases the count under add-remove
            release_count(ctx, problem.n)
    return ctx


def run_pair(pair: NeighbourPair, algorithm: str, hyper: dict | None = None, iterations: int = 3,
             epsilon: float = 1.0, delta: float = 1e-5, broken: str = "none", seed: int = 0,
             coupled: bool = True) -> tuple[SideRun, SideRun]:
    """Run ``algorithm`` on D, then on D' replaying D's releases (module docstring), same seed;
    ``coupled=False``: D' draws its own noise (the same draws), without the replay."""
    if broken not in GREYBOX_VARIANTS:
        raise ValueError(f"broken={broken!r} is unknown; choose one of {', '.join(GREYBOX_VARIANTS)}")
    if broken == "public-n" and pair.relation != LIBRARY_RELATION:
        raise ValueError("the public-n variant breaks the add-remove relation only")
    spec = get_algorithm(algorithm)
    if pair.relation not in spec.relations:
        raise ValueError(f"{algorithm} is not calibrated for {pair.relation!r}")
    pin = pair.w0 if spec.iterative else None
    sides = []
    replay = None
    for problem in (pair.D, pair.D_prime):
        ctx = _context(problem, algorithm, pair.relation, epsilon, delta, iterations, seed, broken, pin, replay)
        with threadpool_limits(1):
            result = spec.run(problem, [ctx], dict(hyper or {}))[0]
        sides.append(SideRun(problem, ctx.ledger, result.w))
        replay = ctx.ledger.releases if coupled else None
    return sides[0], sides[1]


def _objective_event(ledger: PrivacyLedger) -> ObjectivePerturbationEvent | None:
    return next((e for e in ledger.accounting_events if isinstance(e, ObjectivePerturbationEvent)), None)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=RELATIVE_SLACK, abs_tol=0.0) or (math.isinf(a) and a == b)


@dataclass
class GreyboxReport:
    """The findings of :func:`compare_runs`: one line per violated check; ``releases`` checked by (iii);
    ``undeclared``: quantities drawn without a sensitivity (none is charged or passed; checked by (i) and
    (ii) only)."""

    algorithm: str
    relation: str
    broken: str
    releases: int = 0
    violations: list[str] = field(default_factory=list)
    ratios: dict[str, float] = field(default_factory=dict)  # per quantity: max ||input moved|| / covered
    undeclared: list[str] = field(default_factory=list)     # releases whose sensitivity no record states

    @property
    def largest_ratio(self) -> float:
        return max(self.ratios.values(), default=0.0)

    @property
    def passed(self) -> bool:
        return not self.violations


def compare_runs(D: SideRun, Dp: SideRun, algorithm: str = "", relation: str = "",
                 broken: str = "none") -> GreyboxReport:
    """Checks (i)-(iii) of the module docstring on the two sides of :func:`run_pair`."""
    rep = GreyboxReport(algorithm, relation, broken)
    a, b = D.ledger, Dp.ledger
    seq_a = [(r.quantity, r.step) for r in D.releases]
    seq_b = [(r.quantity, r.step) for r in Dp.releases]
    if seq_a != seq_b:
        rep.violations.append(f"(i) release sequences differ: D {seq_a} vs D' {seq_b}")
    if [(e.step, e.quantity) for e in a.entries] != [(e.step, e.quantity) for e in b.entries]:
        rep.violations.append("(i) ledger charges differ in quantity or step")
    if [q for q, _ in a.noised] != [q for q, _ in b.noised]:
        rep.violations.append("(i) scales passed through noise() differ")
    for ea, eb in zip(a.entries, b.entries):
        for key in ("sensitivity", "sigma", "rho"):
            if not _close(getattr(ea, key), getattr(eb, key)):
                rep.violations.append(f"(ii) {ea.quantity} step {ea.step}: charged {key} {getattr(ea, key)!r} "
                                      f"on D, {getattr(eb, key)!r} on D'")
    objective = _objective_event(a)
    for (qa, sa), (_, sb) in zip(a.noised, b.noised):
        if objective is not None and qa == "objective":   # mean-form b/n: compare in sum form
            sa, sb = sa * D.problem.n, sb * Dp.problem.n
        if not _close(sa, sb):
            rep.violations.append(f"(ii) {qa}: noise scale {sa!r} on D, {sb!r} on D'")
    for ra, rb in zip(D.releases, Dp.releases):
        (sa, ca), (sb, cb) = _scales(D, ra, objective), _scales(Dp, rb, objective)
        if not _close(sa, sb):
            rep.violations.append(f"(ii) {ra.quantity} step {ra.step}: noise scale {sa!r} on D, {sb!r} on D'")
        if (ca is None) != (cb is None) or (ca is not None and not _close(ca, cb)):
            rep.violations.append(f"(ii) {ra.quantity} step {ra.step}: sensitivity {ca!r} on D, {cb!r} on D'")
        if ca is None and ra.quantity not in rep.undeclared:
            rep.undeclared.append(ra.quantity)
        if objective is not None or ca is None or ra.value.shape != rb.value.shape:
            continue
        moved = float(np.linalg.norm((ra.value - rb.value).ravel(), ord=ra.norm_order))
        _check_moved(rep, ra.quantity, ra.step, moved, ca)
    if objective is not None:
        _check_objective(rep, D, Dp)
    return rep


def _scales(side: SideRun, release: Release, objective) -> tuple[float, float | None]:
    """(noise scale, covered sensitivity) of a release; objective perturbation's objective noise, drawn in
    mean form (b/n), in sum form (x the run's rows)."""
    if objective is not None and release.quantity == "objective":
        n = side.problem.n
        return release.sigma * n, None if release.covered is None else release.covered * n
    return release.sigma, release.covered


def _check_moved(rep: GreyboxReport, quantity: str, step: int, moved: float, covered: float) -> None:
    rep.releases += 1
    if covered > 0:
        rep.ratios[quantity] = max(rep.ratios.get(quantity, 0.0), moved / covered)
    if moved > covered * (1.0 + RELATIVE_SLACK) + ABSOLUTE_SLACK:
        rep.violations.append(f"(iii) {quantity} step {step}: input moved by {moved:.6g} > sensitivity {covered:.6g}")


def check_post_processing(rep: GreyboxReport, D: SideRun, Dp: SideRun) -> GreyboxReport:
    """(iv) for a mechanism whose output is a function of its releases alone: under the coupling the
    output is the same on D and D' (relative 1e-9, the rounding of the coupled noise); ``rep`` with the
    finding."""
    if not np.allclose(Dp.w, D.w, rtol=RELATIVE_SLACK, atol=ABSOLUTE_SLACK):
        rep.violations.append("(iv) the output differs on D and D' given the same releases: it reads the data "
                              f"beyond them (max |w - w'| = {np.max(np.abs(Dp.w - D.w)):.3g})")
    return rep


def _check_objective(rep: GreyboxReport, D: SideRun, Dp: SideRun) -> None:
    """Objective perturbation's coupling (module docstring): at D's minimiser t, the noise shift
    ||sum_{D'} grad l(t) - sum_D grad l(t)|| against the objective release's covered sensitivity (sum form)."""
    outputs = [r for r in D.releases if r.quantity == "output"]
    objectives = [r for r in D.releases if r.quantity == "objective"]
    if len(outputs) != 1 or len(objectives) != 1:
        rep.violations.append("(iii) objective perturbation: expected one objective and one output release")
        return
    _, covered = _scales(D, objectives[0], True)
    if covered is None:
        return
    t = outputs[0].value
    shift = Dp.problem.grad(t) * Dp.problem.n - D.problem.grad(t) * D.problem.n
    _check_moved(rep, "objective", 0, float(np.linalg.norm(shift)), covered)


def greybox_cases(relation: str) -> list[tuple[str, dict]]:
    """(algorithm, hyper) of every card calibrated for ``relation``: its default configuration and, for a
    configuration with a Poisson sampling rate ``batch_frac``, that rate at 1 (every row in every batch, so
    the canary's change is not left to the sampling)."""
    out = []
    for name, spec in ALGORITHMS.items():
        if relation not in spec.relations:
            continue
        out.append((name, {}))
        cfg = spec.config
        if cfg is not None and "batch_frac" in {f.name for f in dataclasses.fields(cfg[0])}:
            out.append((name, {"batch_frac": 1.0}))
    return out


def greybox_audit(algorithm: str, relation: str, hyper: dict | None = None, broken: str = "none",
                  iterations: int = 3, seed: int = 0, delta: float = 1e-5) -> GreyboxReport:
    """Run and compare one (card, configuration, relation, variant); ``delta`` = 0: a pure_dp card's pure mode."""
    pair = neighbour_pair(relation, seed=seed)
    D, Dp = run_pair(pair, algorithm, hyper, iterations, delta=delta, broken=broken, seed=seed)
    return compare_runs(D, Dp, algorithm, relation, broken)


__all__ = ["GREYBOX_VARIANTS", "GreyboxReport", "NeighbourPair", "RecordingLedger", "Release", "SideRun",
           "check_post_processing", "compare_runs", "greybox_audit", "greybox_cases", "neighbour_pair", "run_pair",
           "BENCHMARK_RELATION", "LIBRARY_RELATION"]
