"""The algorithm registry: one card (:class:`AlgorithmSpec`) per algorithm, registered by its own module.

A card holds everything the package knows about an algorithm: its runner
``run(problem, contexts, hyper) -> list[RunResult]``, its privacy plan (the zCDP methods whose releases
are Gaussian with planned shares: ``plan(hyper, n, d, T, rho) -> PrivacyPlan``, :mod:`dpnewton.privacy.plan`),
how its noise is calibrated (:data:`CALIBRATIONS`), its role for the reports, its label and figure style
(family, colour, marker), its cost model in gradient passes (:mod:`.costs`), whether it is one of the
paper's methods, the neighbouring relations its calibration covers and the part of its protocol that is
not private. The frontier, figures, aggregation, claims, audit and estimator read the
card; no code outside the algorithm's module names an algorithm.

A card is checked when it is made (:meth:`AlgorithmSpec.__post_init__`): a field a consumer needs that is
missing or inconsistent is a ``ValueError`` at registration, never a silent default later.

Third-party algorithms: a package declares an entry point in the group :data:`ENTRY_POINT_GROUP`
whose target is a module that calls :func:`register` on import (docs/extending.md);
:func:`load_plugins` imports them once, after the built-in cards.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import re
from dataclasses import dataclass
from typing import Callable

from ..privacy.neighbouring import BENCHMARK_RELATION, RELATIONS
from ..privacy.plan import PrivacyPlan
from .base import RunResult

#: roles, in report order: private first-order methods; private second-order methods (Newton-type updates,
#: or DP-GD with a privately released curvature); methods with a non-private step (never a winner by
#: budget); one-shot methods (no iteration budget: solved once, costed by their recorded solver steps)
ROLES = ("first-order", "second-order", "non-private step", "one-shot")
ENTRY_POINT_GROUP = "dpnewton.algorithms"
#: how a card's noise is calibrated (its ``calibration``), each with what it implies for the card
CALIBRATIONS = {
    "zcdp-plan": "Gaussian releases with planned shares of a zCDP budget rho (needs plan=...); under "
                 "add/remove its runs first release the row count N and use it for every mean",
    "accountant": "an iterative method whose noise multipliers are calibrated to (epsilon, delta) by an "
                  "accountant (no plan)",
    "one-shot": "a non-iterative method calibrated to (epsilon, delta) by its own analysis (no plan)",
}
#: the filled markers a card may name (its ``marker``)
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "p", "h")
#: colours kept for the figures' reference lines (the trivial output, the floor)
RESERVED_COLOURS = ("#000000", "#737373")

#: ``passes(n, d, hyper) -> (first update, each further update)`` in gradient passes over Z (:mod:`.costs`)
PassModel = Callable[[int, int, dict], "tuple[float, float]"]


#: what an audit row can observe (docs/privacy_audit.md) and its canary pairs
AUDIT_LEVELS = ("output", "gradient-release", "trace-release", "inner-releases", "objective-release",
                "curvature-release")
AUDIT_CANARIES = ("opposed", "zero", "zero-orthogonal")


@dataclass(frozen=True)
class AuditCase:
    """One row of the empirical privacy audit (:mod:`dpnewton.audit`) of the card's algorithm: the run
    (``iterations``, ``hyper``), what is observed (``levels``, :data:`AUDIT_LEVELS`), the canary pair
    (:data:`AUDIT_CANARIES`), whether the run's random start is pinned to the pair's w0, and a note."""

    name: str
    levels: tuple[str, ...] = ("output",)
    note: str = ""
    iterations: int = 1
    hyper: dict = dataclasses.field(default_factory=dict)
    canary: str = "opposed"
    pin_start: bool = True

    def __post_init__(self):
        bad = set(self.levels) - set(AUDIT_LEVELS)
        if not self.levels or bad:
            raise ValueError(f"audit case {self.name!r}: levels {self.levels!r} must be among "
                             f"{', '.join(AUDIT_LEVELS)}")
        if self.canary not in AUDIT_CANARIES:
            raise ValueError(f"audit case {self.name!r}: canary {self.canary!r} must be one of "
                             f"{', '.join(AUDIT_CANARIES)}")
        if not (isinstance(self.iterations, int) and self.iterations >= 1):
            raise ValueError(f"audit case {self.name!r}: iterations must be an integer >= 1")


def build_config(cls, hyper: dict, fixed: dict | None = None):
    """cls(**fixed, **hyper).validated(), with a clear error for unknown or conflicting keys. Every
    algorithm's configuration class has ``validated()``: it raises ValueError naming a bad value and
    returns the configuration with its defaults resolved (the run functions call it too)."""
    fixed = fixed or {}
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(hyper) - names)
    if unknown:
        raise ValueError(f"unknown hyper-parameter(s) {unknown}; allowed: {sorted(names - set(fixed))}")
    clash = sorted(set(hyper) & set(fixed))
    if clash:
        raise ValueError(f"hyper-parameter(s) {clash} are fixed by the algorithm name")
    return cls(**fixed, **hyper).validated()


def configured_nonprivate(spec: "AlgorithmSpec", hyper: dict | None = None) -> tuple[str, ...]:
    """The non-private parts of ``spec`` run with ``hyper``, known before any data: the card's own
    (``nonprivate``) and those its configuration switches on (a configuration class may define
    ``nonprivate_parts()``, e.g. a data-dependent reset or noise multipliers fixed by hand)."""
    parts = (spec.nonprivate,) if spec.nonprivate else ()
    if spec.config is not None:
        cls, fixed = spec.config
        cfg = build_config(cls, dict(hyper or {}), fixed)
        parts += tuple(getattr(cfg, "nonprivate_parts", tuple)())
    return parts


@dataclass(frozen=True)
class AlgorithmSpec:
    """An algorithm's card.

    Required: ``name`` (CLI, configs, result tables), ``run``, ``description``, ``label`` (figures and
    tables), ``role`` (one of :data:`ROLES`), ``paper`` (one of the paper's methods, counted apart from
    the project's in every report), ``audit`` (its rows of the empirical privacy audit, :class:`AuditCase`;
    ``()`` is a declaration that it is not audited on its own, said in a comment on the card),
    ``calibration`` (one of :data:`CALIBRATIONS`, checked against ``plan`` and ``iterative``), its figure
    style: ``family`` (the methods it is drawn and grouped with, e.g. "double-noise Newton"), ``colour``
    ("#rrggbb", its own: no two built-in cards share one) and ``marker`` (one of :data:`MARKERS`, shared by
    its family), so that a new card never restyles another, and, for an iterative method, ``passes`` (its
    cost model). Optional:
    ``batched`` (shares passes over Z across runs), ``lockstep`` (batched, and its runner also takes one
    configuration per run: ``hyper`` a list of dicts, one per context, each run applying its own; the
    pipeline then runs every configuration, epsilon and conversion of the algorithm on a dataset as one
    job, :func:`dpnewton.pipeline.plan.group_jobs`), ``nonprivate`` (the non-private part of its protocol;
    required exactly when the role is "non-private step"), ``plan``, ``relations`` (the neighbouring
    relations its noise calibration covers, :mod:`dpnewton.privacy.neighbouring`), ``timed_as`` (a
    one-shot method: the timed algorithm whose update stands for one Newton step of its solve),
    ``kept_iterates`` (it keeps every iterate: memory (T + 1) x d), ``pure_dp`` (with delta = 0 it runs a
    pure epsilon-DP mechanism: delta = 0 is accepted only by such a card), ``edge_note`` (why its best T may
    sit at a grid edge, printed beside such cells), ``loss_note`` (why its excess loss is not comparable
    with the other methods', e.g. measured on another objective: the loss figures leave it out and their
    captions say why).
    """

    name: str
    run: Callable[..., list[RunResult]]
    description: str
    label: str
    role: str
    paper: bool
    audit: tuple[AuditCase, ...]
    calibration: str = ""
    family: str = ""
    colour: str = ""
    marker: str = ""
    passes: PassModel | None = None
    iterative: bool = True
    batched: bool = False
    lockstep: bool = False
    nonprivate: str = ""
    plan: Callable[..., PrivacyPlan] | None = None
    relations: tuple[str, ...] = (BENCHMARK_RELATION,)
    pure_dp: bool = False
    timed_as: str = ""
    kept_iterates: bool = False
    edge_note: str = ""
    loss_note: str = ""

    def __post_init__(self):
        where = f"algorithm card {self.name!r}"
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"{where}: name must be a non-empty string")
        for key in ("description", "label"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key).strip():
                raise ValueError(f"{where}: {key} must be a non-empty string")
        if not callable(self.run):
            raise ValueError(f"{where}: run must be callable run(problem, contexts, hyper)")
        if self.role not in ROLES:
            raise ValueError(f"{where}: role={self.role!r} must be one of {', '.join(ROLES)}")
        if not isinstance(self.paper, bool):
            raise ValueError(f"{where}: paper must be True or False (is it one of the paper's methods?)")
        if (self.role == "non-private step") != bool(self.nonprivate):
            raise ValueError(f"{where}: role 'non-private step' and a non-empty nonprivate text go together")
        if self.iterative and not callable(self.passes):
            raise ValueError(f"{where}: an iterative method needs passes(n, d, hyper) -> (first, per update), "
                             "its cost in gradient passes (dpnewton.algorithms.costs)")
        if not self.iterative and (self.role != "one-shot" or not self.timed_as):
            raise ValueError(f"{where}: a non-iterative method has role 'one-shot' and names timed_as, the timed "
                             "algorithm whose update stands for one Newton step of its solve")
        if not isinstance(self.audit, tuple) or not all(isinstance(c, AuditCase) for c in self.audit):
            raise ValueError(f"{where}: audit must be a tuple of AuditCase rows (or () to declare none)")
        if self.lockstep and not (self.batched and self.config is not None):
            raise ValueError(f"{where}: a lockstep algorithm is batched and has a runner(...) configuration (its "
                             "runner takes one configuration per run)")
        unknown = set(self.relations) - set(RELATIONS)
        if not self.relations or unknown:
            raise ValueError(f"{where}: relations {self.relations!r} must be among {', '.join(RELATIONS)}")
        self._check_calibration(where)
        self._check_style(where)

    def _check_calibration(self, where: str) -> None:
        """``calibration`` is one of :data:`CALIBRATIONS` and agrees with ``plan`` and ``iterative``."""
        if self.calibration not in CALIBRATIONS:
            choices = "; ".join(f"{k!r}: {v}" for k, v in CALIBRATIONS.items())
            raise ValueError(f"{where}: calibration={self.calibration!r}; add calibration=... naming how its noise "
                             f"is calibrated, one of {choices}")
        if (self.calibration == "zcdp-plan") != (self.plan is not None):
            raise ValueError(f"{where}: calibration={self.calibration!r} contradicts its plan: a card has "
                             "plan=... exactly when its calibration is 'zcdp-plan'")
        if self.calibration == "accountant" and not self.iterative:
            raise ValueError(f"{where}: calibration 'accountant' is for an iterative method; a non-iterative one "
                             "calibrated to (epsilon, delta) by its own analysis is 'one-shot'")
        if self.calibration == "one-shot" and self.iterative:
            raise ValueError(f"{where}: calibration 'one-shot' is for a non-iterative method (iterative=False); "
                             "an iterative method calibrated to (epsilon, delta) is 'accountant'")

    def _check_style(self, where: str) -> None:
        """``family``, ``colour`` and ``marker`` name the card's figure style."""
        if not isinstance(self.family, str) or not self.family.strip():
            raise ValueError(f"{where}: add family=... (the methods it is drawn with, e.g. 'gradient descent'; "
                             "its figure style: family, colour and marker)")
        if not (isinstance(self.colour, str) and re.fullmatch(r"#[0-9a-f]{6}", self.colour)):
            raise ValueError(f"{where}: colour={self.colour!r}; add colour='#rrggbb' (lower-case hex), a colour of "
                             "its own (docs/extending.md, Add an algorithm: how to list the taken ones)")
        if self.colour in RESERVED_COLOURS:
            raise ValueError(f"{where}: colour {self.colour} is kept for the figures' reference lines; choose another")
        if self.marker not in MARKERS:
            raise ValueError(f"{where}: marker={self.marker!r}; add marker=... one of {' '.join(MARKERS)} "
                             "(its family's)")

    @property
    def zcdp(self) -> bool:
        """Whether its budget is a zCDP rho spent by its plan (calibration "zcdp-plan"); otherwise its
        noise is calibrated to (epsilon, delta) and composes as (epsilon, delta)."""
        return self.calibration == "zcdp-plan"

    @property
    def releases_count(self) -> bool:
        """Whether its runs under add/remove first release the row count N and use it for every mean and
        sensitivity (:func:`dpnewton.experiment.release_count`): the zCDP-planned methods, whose
        sensitivities are c/N. An (epsilon, delta)-calibrated card covers add/remove, when its ``relations``
        say so, in its own analysis."""
        return self.zcdp

    @property
    def config(self) -> tuple[type, dict] | None:
        """(configuration class, fields fixed by the name) of a :func:`runner`-built run, else None."""
        return getattr(self.run, "config", None)

    @property
    def averaging(self) -> bool:
        """Whether a run can release an average of its iterates (its configuration has ``average``)."""
        cfg = self.config
        return cfg is not None and "average" in {f.name for f in dataclasses.fields(cfg[0])}

    def pass_equivalents(self, n: int, d: int, hyper: dict | None = None) -> tuple[float, float]:
        """(first update, each further update) in gradient passes; (NaN, NaN) for a one-shot method,
        whose cost depends on its recorded solver steps, not on T."""
        if not self.iterative:
            return float("nan"), float("nan")
        return self.passes(n, d, dict(hyper or {}))


def runner(config_cls, run_fn, **fixed):
    """``run(problem, contexts, hyper)`` that builds ``config_cls`` from hyper (+ fixed fields); its
    ``config`` attribute is (config_cls, fixed), so a configuration can be checked without data
    (:attr:`AlgorithmSpec.config`). ``hyper`` may also be a list of dicts, one per context (a lockstep
    batch): ``run_fn`` then gets the list of their configurations."""
    def run(problem, contexts, hyper):
        if isinstance(hyper, list):
            return run_fn(problem, contexts, [build_config(config_cls, h, fixed) for h in hyper])
        return run_fn(problem, contexts, build_config(config_cls, hyper, fixed))
    run.config = (config_cls, dict(fixed))
    return run


def planner(config_cls, plan_fn, **fixed):
    """``plan(hyper, n, d, T, rho)`` that builds ``config_cls`` from hyper (+ fixed fields) as the runner does."""
    def plan(hyper, n, d, T, rho):
        return plan_fn(build_config(config_cls, dict(hyper), fixed), n, d, T, rho)
    return plan


def costed(config_cls, passes_fn, **fixed):
    """``passes(n, d, hyper)`` that builds ``config_cls`` from hyper (+ fixed fields) as the runner does,
    so a cost model reads resolved defaults: ``passes_fn(cfg, n, d)``."""
    def passes(n, d, hyper):
        return passes_fn(build_config(config_cls, dict(hyper), fixed), n, d)
    return passes


def with_train_accuracy(run):
    """``run`` whose results all have ``train_accuracy``: the full-batch drivers
    (:mod:`.base`) take it from the final iterate's margins; for results without it (one-shot,
    cubic and minibatch methods, whose final evaluation computes no margins) it is
    ``problem.accuracy(w)``, computed here, after the timed updates."""
    @functools.wraps(run)    # keeps ``config``
    def run_with_accuracy(problem, contexts, hyper):
        results = run(problem, contexts, hyper)
        for res in results:
            if res.train_accuracy is None:
                res.train_accuracy = problem.accuracy(res.w)
        return results
    return run_with_accuracy


ALGORITHMS: dict[str, AlgorithmSpec] = {}


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    """Add ``spec`` to :data:`ALGORITHMS` (its runner wrapped by :func:`with_train_accuracy`).
    A one-shot card's ``timed_as`` must already be registered."""
    if not isinstance(spec, AlgorithmSpec):
        raise TypeError(f"register() takes an AlgorithmSpec; got {type(spec).__name__}")
    if spec.name in ALGORITHMS:
        raise ValueError(f"algorithm {spec.name!r} is registered twice")
    if spec.timed_as and spec.timed_as not in ALGORITHMS:
        raise ValueError(f"algorithm card {spec.name!r}: timed_as={spec.timed_as!r} is not a registered algorithm")
    spec = dataclasses.replace(spec, run=with_train_accuracy(spec.run))
    ALGORITHMS[spec.name] = spec
    return spec


def get_algorithm(name: str) -> AlgorithmSpec:
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


def with_role(role: str, names=None) -> tuple[str, ...]:
    """The registered algorithms of ``role`` (among ``names`` when given), in registration order."""
    if role not in ROLES:
        raise ValueError(f"role={role!r} must be one of {', '.join(ROLES)}")
    keep = None if names is None else set(names)
    return tuple(a for a, s in ALGORITHMS.items() if s.role == role and (keep is None or a in keep))


def load_plugins() -> list[str]:
    """Import every module declared in the entry-point group :data:`ENTRY_POINT_GROUP` (each registers
    its cards on import); returns the entry points' names. A plugin that fails to import is an error
    naming the plugin and its package, never a silent omission."""
    loaded = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:
            dist = getattr(ep.dist, "name", "?")
            raise ImportError(f"the dpnewton algorithm plugin {ep.name!r} ({ep.value}, package {dist}) failed to "
                              f"load: {type(exc).__name__}: {exc}") from exc
        loaded.append(ep.name)
    return loaded
