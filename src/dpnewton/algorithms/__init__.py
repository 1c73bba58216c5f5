"""Registry of optimizers: name -> how to build its configuration and run a batch of runs.

Each entry maps the algorithm name used on the CLI, in configs and in result tables to a runner
``run(problem, contexts, hyper) -> list[RunResult]`` and, for the zCDP methods whose releases are
Gaussian with planned shares, its privacy plan ``plan(hyper, n, d, T, rho) -> PrivacyPlan``
(:mod:`dpnewton.privacy.plan`; None for the accountant- or (epsilon, delta)-calibrated methods).
``hyper`` is a dict of hyper-parameters; unknown keys raise ``ValueError`` naming them.
:func:`register` makes every registered runner
return its results with ``train_accuracy`` set (:func:`with_train_accuracy`).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Callable

from ..privacy.neighbouring import RELATIONS, BENCHMARK_RELATION
from ..privacy.plan import PrivacyPlan

from .aop import AopConfig, run_aop
from .base import RunContext, RunResult
from .cubic_newton import CubicNewtonConfig, cubic_newton_plan, run_cubic_newton
from .damped_newton import DampedNewtonConfig, damped_newton_plan, run_damped_newton
from .double_noise import DoubleNoiseConfig, double_noise_plan, run_double_noise
from .gradient_descent import GradientDescentConfig, OracleConfig, gradient_plan, run_dp_gd, run_dp_gd_oracle
from .minibatch import MinibatchNewtonConfig, SgdConfig, run_dp_sgd, run_minibatch_newton
from .objpert import ObjpertConfig, run_objpert
from .precond import PrecondConfig, precond_plan, run_precond_dp_gd


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


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    run: Callable[..., list[RunResult]]
    description: str
    iterative: bool = True
    batched: bool = False            # shares passes over Z across runs
    nonprivate: str = ""             # the part of the protocol that is not private, if any
    plan: Callable[..., PrivacyPlan] | None = None   # plan(hyper, n, d, T, rho): the run's releases as data
    #: the neighbouring relations its noise calibration covers (:mod:`dpnewton.privacy.neighbouring`)
    relations: tuple[str, ...] = (BENCHMARK_RELATION,)

    @property
    def config(self) -> tuple[type, dict] | None:
        """(configuration class, fields fixed by the name) of a :func:`runner`-built run, else None."""
        return getattr(self.run, "config", None)


def runner(config_cls, run_fn, **fixed):
    """``run(problem, contexts, hyper)`` that builds ``config_cls`` from hyper (+ fixed fields); its
    ``config`` attribute is (config_cls, fixed), so a configuration can be checked without data
    (:attr:`AlgorithmSpec.config`)."""
    def run(problem, contexts, hyper):
        return run_fn(problem, contexts, build_config(config_cls, hyper, fixed))
    run.config = (config_cls, dict(fixed))
    return run


def planner(config_cls, plan_fn, **fixed):
    """``plan(hyper, n, d, T, rho)`` that builds ``config_cls`` from hyper (+ fixed fields) as the runner does."""
    def plan(hyper, n, d, T, rho):
        return plan_fn(build_config(config_cls, dict(hyper), fixed), n, d, T, rho)
    return plan


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
    """Add ``spec`` to :data:`ALGORITHMS` (its runner wrapped by :func:`with_train_accuracy`)."""
    if spec.name in ALGORITHMS:
        raise ValueError(f"algorithm {spec.name!r} is registered twice")
    spec = dataclasses.replace(spec, run=with_train_accuracy(spec.run))
    ALGORITHMS[spec.name] = spec
    return spec


for _soi, _soi_label in (("hessian", "hess"), ("qu", "qu")):
    for _mod in ("clip", "add"):
        register(AlgorithmSpec(f"{_soi_label}-{_mod}",
                               runner(DoubleNoiseConfig, run_double_noise, soi=_soi, modification=_mod),
                               f"double-noise Newton, {_soi} SOI, {_mod} modification (Algorithm 3)",
                               plan=planner(DoubleNoiseConfig, double_noise_plan, soi=_soi, modification=_mod)))
        register(AlgorithmSpec(f"minibatch-{_soi_label}-{_mod}",
                               runner(MinibatchNewtonConfig, run_minibatch_newton, soi=_soi, modification=_mod),
                               f"minibatch double-noise Newton, {_soi} SOI, {_mod}, fixed lambda, "
                               "Poisson batches, RDP-calibrated noise"))

register(AlgorithmSpec("dp-gd", runner(GradientDescentConfig, run_dp_gd), "DP-GD with step 1/L1 = 4",
                       batched=True, plan=planner(GradientDescentConfig, gradient_plan), relations=RELATIONS))
register(AlgorithmSpec("precond-dp-gd", runner(PrecondConfig, run_precond_dp_gd),
                       "DP-GD preconditioned by a privately released Böhning bound Z^T Z/(4n), eigenvalues "
                       "clipped at lambda_mult * sigma_B * sqrt(d) (or lambda_mode=adaptive); step 1, "
                       "precond_frac 0.1 of rho for B; refresh=k: SOI at w_t every k steps",
                       batched=True, plan=planner(PrecondConfig, precond_plan), relations=RELATIONS))
register(AlgorithmSpec("dp-gd-oracle", runner(OracleConfig, run_dp_gd_oracle),
                       "noisy GD with a line-search step on the exact loss", batched=True,
                       nonprivate="line-search step size",
                       plan=planner(OracleConfig,
                                    lambda cfg, n, d, T, rho: gradient_plan(cfg, n, d, T, rho, "dp-gd-oracle"))))
register(AlgorithmSpec("damped-newton", runner(DampedNewtonConfig, run_damped_newton),
                       "damped private Newton of [Medina21]",
                       nonprivate="damped step size log(1+beta)/beta from the exact Hessian",
                       plan=planner(DampedNewtonConfig, damped_newton_plan)))
register(AlgorithmSpec("dp-sgd", runner(SgdConfig, run_dp_sgd),
                       "DP-SGD, Poisson batches, step 4, RDP-calibrated noise multiplier"))
register(AlgorithmSpec("aop", runner(AopConfig, run_aop),
                       "approximate objective perturbation (Iyengar et al. 2019) on Z; T is ignored",
                       iterative=False))
register(AlgorithmSpec("objpert", runner(ObjpertConfig, run_objpert),
                       "objective perturbation with the tight privacy profile (Redberg-Koskela-Wang 2023) "
                       "+ approximate-minimum output noise, on Z; T is ignored", iterative=False,
                       relations=RELATIONS))
register(AlgorithmSpec("cubic-newton", runner(CubicNewtonConfig, run_cubic_newton),
                       "private cubic-regularised Newton (Algorithms 1-2) on l2-regularised loss over a ball",
                       plan=planner(CubicNewtonConfig, cubic_newton_plan)))


def get_algorithm(name: str) -> AlgorithmSpec:
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


__all__ = ["ALGORITHMS", "AlgorithmSpec", "RunContext", "RunResult", "get_algorithm", "register",
           "build_config", "runner", "with_train_accuracy"]
