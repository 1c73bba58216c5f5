"""Registry of optimizers: name -> how to build its configuration and run a batch of runs.

Each entry maps the algorithm name used on the CLI, in configs and in result tables to a runner
``run(problem, contexts, hyper) -> list[RunResult]``. ``hyper`` is a dict of hyper-parameters;
unknown keys raise ``ValueError`` naming them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from .base import RunContext, RunResult
from .damped_newton import DampedNewtonConfig, run_damped_newton
from .double_noise import DoubleNoiseConfig, run_double_noise
from .gradient_descent import GradientDescentConfig, OracleConfig, run_dp_gd, run_dp_gd_oracle


def build_config(cls, hyper: dict, fixed: dict | None = None):
    """cls(**fixed, **hyper) with a clear error for unknown or conflicting keys."""
    fixed = fixed or {}
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(hyper) - names)
    if unknown:
        raise ValueError(f"unknown hyper-parameter(s) {unknown}; allowed: {sorted(names - set(fixed))}")
    clash = sorted(set(hyper) & set(fixed))
    if clash:
        raise ValueError(f"hyper-parameter(s) {clash} are fixed by the algorithm name")
    return cls(**fixed, **hyper)


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    run: Callable[..., list[RunResult]]
    description: str
    iterative: bool = True
    batched: bool = False            # shares passes over Z across runs
    nonprivate: str = ""             # the part of the protocol that is not private, if any


def _double_noise(soi: str, modification: str):
    def run(problem, contexts, hyper):
        cfg = build_config(DoubleNoiseConfig, hyper, {"soi": soi, "modification": modification})
        return run_double_noise(problem, contexts, cfg)
    return run


ALGORITHMS: dict[str, AlgorithmSpec] = {}


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    if spec.name in ALGORITHMS:
        raise ValueError(f"algorithm {spec.name!r} is registered twice")
    ALGORITHMS[spec.name] = spec
    return spec


for _soi, _soi_label in (("hessian", "hess"), ("qu", "qu")):
    for _mod in ("clip", "add"):
        register(AlgorithmSpec(f"{_soi_label}-{_mod}", _double_noise(_soi, _mod),
                               f"double-noise Newton, {_soi} SOI, {_mod} modification (Algorithm 3)"))

register(AlgorithmSpec("dp-gd", lambda p, c, h: run_dp_gd(p, c, build_config(GradientDescentConfig, h)),
                       "DP-GD with step 1/L1 = 4", batched=True))
register(AlgorithmSpec("dp-gd-oracle",
                       lambda p, c, h: run_dp_gd_oracle(p, c, build_config(OracleConfig, h)),
                       "noisy GD with a line-search step on the exact loss", batched=True,
                       nonprivate="line-search step size"))
register(AlgorithmSpec("damped-newton",
                       lambda p, c, h: run_damped_newton(p, c, build_config(DampedNewtonConfig, h)),
                       "damped private Newton of [Medina21]",
                       nonprivate="damped step size log(1+beta)/beta from the exact Hessian"))


def get_algorithm(name: str) -> AlgorithmSpec:
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


__all__ = ["ALGORITHMS", "AlgorithmSpec", "RunContext", "RunResult", "get_algorithm", "register",
           "build_config"]


# ---- issue 3: minibatch methods (accountant-calibrated), AOP, private cubic Newton ------------
from .aop import AopConfig, run_aop  # noqa: E402
from .cubic_newton import CubicNewtonConfig, run_cubic_newton  # noqa: E402
from .minibatch import MinibatchNewtonConfig, SgdConfig, run_dp_sgd, run_minibatch_newton  # noqa: E402


def _minibatch_newton(soi: str, modification: str):
    def run(problem, contexts, hyper):
        cfg = build_config(MinibatchNewtonConfig, hyper, {"soi": soi, "modification": modification})
        return run_minibatch_newton(problem, contexts, cfg)
    return run


for _soi, _soi_label in (("hessian", "hess"), ("qu", "qu")):
    for _mod in ("clip", "add"):
        register(AlgorithmSpec(f"minibatch-{_soi_label}-{_mod}", _minibatch_newton(_soi, _mod),
                               f"minibatch double-noise Newton, {_soi} SOI, {_mod}, fixed lambda, "
                               "Poisson batches, RDP-calibrated noise"))
register(AlgorithmSpec("dp-sgd", lambda p, c, h: run_dp_sgd(p, c, build_config(SgdConfig, h)),
                       "DP-SGD, Poisson batches, step 4, RDP-calibrated noise multiplier"))
register(AlgorithmSpec("aop", lambda p, c, h: run_aop(p, c, build_config(AopConfig, h)),
                       "approximate objective perturbation (Iyengar et al. 2019) on Z; T is ignored",
                       iterative=False))
register(AlgorithmSpec("cubic-newton",
                       lambda p, c, h: run_cubic_newton(p, c, build_config(CubicNewtonConfig, h)),
                       "private cubic-regularised Newton (Algorithms 1-2) on l2-regularised loss over a ball"))
