"""Broken variants of the audited mechanisms: how too little noise is injected (no production code changes).

One factor table, :func:`noise_factor`, applied three ways (:attr:`~.mechanisms.AuditMechanism.calibration`):

* zCDP-ledger methods: :class:`AuditLedger`, the production ledger that returns a scaled sigma;
* accountant-calibrated minibatch methods: hand-set noise multipliers (:func:`_accountant_hyper`);
* AOP, objpert and cubic Newton: a scoped wrapper of their noise-scale function (:func:`_patched_noise`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..algorithms import aop, cubic_newton, objpert
from ..algorithms.minibatch import MinibatchNewtonConfig, SgdConfig, _expected_batch
from ..loss import LogisticProblem
from ..privacy import PrivacyLedger
from ..privacy.accountant import calibrate_poisson_gaussian, calibrate_two_mechanisms

if TYPE_CHECKING:  # type hints only: dpnewton.audit.mechanisms imports this module (cycle)
    from .mechanisms import AuditMechanism

BROKEN_VARIANTS = ("none", "half-noise", "wrong-sensitivity", "tenth-noise")
# releases whose noise is calibrated to a gradient's sensitivity (``wrong-sensitivity`` divides it by 4):
# the ledger's "gradient", cubic Newton's inner "model-gradient", AOP's objective noise b
GRADIENT_QUANTITIES = ("gradient", "model-gradient", "objective")


def _check_broken(broken: str) -> str:
    """``broken`` itself if it names a variant of :data:`BROKEN_VARIANTS`, else a ValueError."""
    if broken not in BROKEN_VARIANTS:
        raise ValueError(f"broken={broken!r} is unknown; choose one of {', '.join(BROKEN_VARIANTS)}")
    return broken


def noise_factor(broken: str, quantity: str) -> float:
    """Factor a broken variant applies to the noise scale of one release (1 for ``none``).

    ``half-noise`` 1/2 and ``tenth-noise`` 1/10 for every release; ``wrong-sensitivity`` 1/4 for the
    gradient-type releases (:data:`GRADIENT_QUANTITIES`: noise for the SOI bound 1/(4n) instead of
    the gradient's 1/n, docs/algorithms.md §6.1), other releases untouched.
    """
    if _check_broken(broken) == "wrong-sensitivity":
        return 0.25 if quantity in GRADIENT_QUANTITIES else 1.0
    return {"none": 1.0, "half-noise": 0.5, "tenth-noise": 0.1}[broken]


class AuditLedger(PrivacyLedger):
    """The production ledger; it also keeps the sigma each ``charge`` returned (``returned``).

    ``broken`` (one of :data:`BROKEN_VARIANTS`, default ``"none"``): the entry is recorded as the
    production ledger does, the returned sigma is scaled by :func:`noise_factor` (the only change a
    broken variant makes; ``none`` returns the production sigma).
    """

    def __init__(self, budget_rho: float, broken: str = "none"):
        super().__init__(budget_rho)
        self.broken = _check_broken(broken)
        self.returned: list[float] = []

    def charge(self, step: int, quantity: str, sensitivity: float, rho: float) -> float:
        sigma = noise_factor(self.broken, quantity) * PrivacyLedger.charge(self, step, quantity, sensitivity, rho)
        self.returned.append(sigma)
        return sigma


def _accountant_hyper(mech: AuditMechanism, problem: LogisticProblem, epsilon: float, delta: float,
                      broken: str) -> dict:
    """Broken variants of the accountant-calibrated methods: hand-set multipliers (no code change).

    The calibrated multipliers are recomputed exactly as the production code does for this side's
    n and scaled by :func:`noise_factor`: ``half-noise`` / ``tenth-noise`` scale all of them by 1/2 /
    1/10, ``wrong-sensitivity`` divides the gradient's by 4 (noise for a 4x smaller sensitivity).
    Hand-set multipliers mark the ledger non-private; irrelevant here.
    """
    hyper = dict(mech.hyper)
    if broken == "none":
        return hyper
    n = problem.n
    if mech.algorithm == "dp-sgd":
        cfg = SgdConfig(**{k: v for k, v in hyper.items() if k in ("batch_size", "batch_frac")})
        b = _expected_batch(cfg.batch_size, n, cfg.batch_frac, "batch_size")
        z = calibrate_poisson_gaussian(b / n, mech.iterations, epsilon, delta).multipliers[0]
        hyper["noise_multiplier"] = z * noise_factor(broken, "gradient")
        return hyper
    cfg = MinibatchNewtonConfig(**{k: v for k, v in hyper.items()
                                   if k in ("batch_grad", "batch_hess", "batch_frac", "grad_frac")})
    b_g = _expected_batch(cfg.batch_grad, n, cfg.batch_frac, "batch_grad")
    b_h = _expected_batch(cfg.batch_hess, n, cfg.batch_frac, "batch_hess")
    z_g, z_h = calibrate_two_mechanisms(b_g / n, b_h / n, mech.iterations, epsilon, delta,
                                        cfg.grad_frac).multipliers
    hyper["noise_multipliers"] = (z_g * noise_factor(broken, "gradient"), z_h * noise_factor(broken, "hessian"))
    return hyper


@contextmanager
def _patched_noise(mech: AuditMechanism, broken: str):
    """Broken variants of AOP, objpert and cubic Newton, whose noise does not come from the ledger.

    Module-level patch of one noise-scale function for the duration of the trials (restored after),
    scaled by :func:`noise_factor`: AOP ``aop_parameters`` and objpert ``objpert_parameters``
    (sigma_obj as the ``objective`` release, sigma_out as the ``output`` release: half-noise /
    tenth-noise scale both, wrong-sensitivity only sigma_obj, i.e. the objective noise of a 4x smaller
    gradient sensitivity; objpert's sum-form ``sigma`` is scaled with its sigma_obj = sigma/n); cubic
    Newton ``dp_cubic_solver`` (sigma of the inner ``model-gradient`` releases).
    """
    if broken == "none" or mech.calibration not in ("aop", "objpert", "cubic"):
        yield
        return
    if mech.calibration in ("aop", "objpert"):
        module = aop if mech.calibration == "aop" else objpert
        name = f"{mech.calibration}_parameters"
        original = getattr(module, name)

        def replacement(*args, **kw):
            out = dict(original(*args, **kw))
            for key in ("sigma_obj", "sigma"):
                if key in out:
                    out[key] *= noise_factor(broken, "objective")
            out["sigma_out"] *= noise_factor(broken, "output")
            return out
    else:
        module = cubic_newton
        original = module.dp_cubic_solver
        factor = noise_factor(broken, "model-gradient")

        def replacement(g, H, theta0, N, mu, L2, radius, sigma, rng, charge=None, record=None):
            return original(g, H, theta0, N, mu, L2, radius, sigma * factor, rng, charge, record)

        name = "dp_cubic_solver"
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, original)
