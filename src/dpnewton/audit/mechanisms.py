"""Audited mechanisms: the production optimizers run on a canary pair (D, D') many times.

What runs is the *real* algorithm code (``get_algorithm(name).run``), fed with crafted
:class:`~dpnewton.algorithms.RunContext` objects:

* the ledger is an :class:`AuditLedger` (a :class:`~dpnewton.privacy.PrivacyLedger` that also
  remembers the sigma it handed out). For the zCDP-ledger methods a broken variant is the same
  ledger built with ``broken=...``, which changes only the sigma ``charge`` returns, by
  :func:`noise_factor`: ``half-noise`` sigma/2, ``tenth-noise`` sigma/10 (every release),
  ``wrong-sensitivity`` sigma/4 for the gradient (noise for the SOI bound 1/(4n) instead of 1/n).
  Methods whose noise does not come from ``charge`` get the same variants another way
  (:attr:`AuditMechanism.calibration`): hand-set noise multipliers for the accountant-calibrated
  minibatch methods, a scoped wrapper of the noise-scale function for AOP and cubic Newton. No
  production code path is modified (cubic Newton runs with its audit option ``record_releases``,
  which only keeps a copy of the inner releases);
* the random generator is a :class:`PinnedStartRng`: it returns a fixed starting point for the
  first draw (``random_unit_vector``) so every trial starts at the same w0, then serves - and
  records - the run's Gaussian and uniform draws from one shared generator.

Canary pairs (:func:`canary_pair`): ``opposed`` (the default: D = n records z_i = -u, D' = D + z_c
= +u; the mean gradient moves by exactly u/(n+1) at *every* w, i.e. by |grad l(w; z_c) - mean_D|
= 1 = L over n+1 (two records at an angle can exceed this slightly at ||w|| = 1 and more at larger
||w||); both SOIs are unchanged, so the SOI-based releases carry no signal), ``zero`` (zero records
+ the canary: for Poisson-subsampled sums) and ``zero-orthogonal`` (zero records + a canary
orthogonal to the start: it changes the SOI's trace by the trace sensitivity, exciting the trace
release of double-noise Newton).

Audit levels (stated per row of the results table):

``output``   the whole algorithm output w_T, statistic <w_T, u> (post-processing of all releases);
``gradient-release``  the first released noisy gradient g~_0 = grad(w0) (+ reg w0) + s_g xi,
             reconstructed from the recorded draw xi and the sigma the ledger returned (minibatch:
             also from the recorded Poisson coin flips; cubic Newton: the first inner model
             gradient), statistic -<g~_0, u>. Its own budget is only a share of the run's;
``trace-release``  the first noisy trace tr H(w0) + s_tr xi of the adaptive lambda;
``curvature-release``  precond-dp-gd: the released entry (1, 1) of B~ = Z^T Z/(4n) + S (the canary
             u = e_1's coordinate; S's upper triangle is i.i.d. N(0, s_B^2), so this entry carries
             all of the canary's signal), rebuilt from the recorded draw and the sigma the ledger
             returned; claim: the GDP epsilon of the curvature share precond_frac of rho;
``inner-releases``  cubic Newton: all N noisy model gradients of the (single) outer step, statistic
             the sum of their canary components minus D's model gradient (:func:`_cubic_inner_releases`);
``objective-release``  AOP: the perturbed minimiser before the output noise, statistic <theta^, u>
             (:func:`_aop_objective_release`), claim eps_obj.
"""

from __future__ import annotations

import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ..algorithms import RunContext, get_algorithm
from ..loss import LogisticProblem
from ..privacy import PrivacyLedger, epsilon_to_rho, rho_to_epsilon
from ..seeding import RunIdentity

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


class PinnedStartRng:
    """Generator stand-in: pinned first draw (the start w0), recorded later draws.

    ``start=None`` pins nothing (for methods that do not draw a start, e.g. AOP). Gaussian draws are
    recorded in ``draws``, uniform draws (Poisson-subsampling masks) in ``uniforms``.
    """

    def __init__(self, base: np.random.Generator, start: np.ndarray | None):
        self._base = base
        self._start = None if start is None else np.asarray(start, dtype=np.float64)
        self._pinned = start is None
        self.draws: list = []
        self.uniforms: list = []

    def standard_normal(self, size=None):
        if not self._pinned:
            if size != self._start.shape[0] and size != self._start.shape:
                raise RuntimeError(f"the first draw of a run must be the start (size {self._start.shape}); got {size}")
            self._pinned = True
            return self._start.copy()
        x = self._base.standard_normal(size)
        self.draws.append(x)
        return x

    def random(self, size=None):
        x = self._base.random(size)
        self.uniforms.append(x)
        return x

    def __getattr__(self, name):  # anything else (integers, random, ...) from the shared generator
        return getattr(self._base, name)


@dataclass(frozen=True)
class CanaryPair:
    D: LogisticProblem
    D_prime: LogisticProblem
    canary: np.ndarray          # unit vector u
    w0: np.ndarray              # common starting point (unit norm)
    delta: float                # 1/n^2 with n = |D|

    @property
    def n(self) -> int:
        return self.D.n


CANARIES = ("opposed", "zero", "zero-orthogonal")
LEVELS = ("output", "gradient-release", "trace-release", "inner-releases", "objective-release",
          "curvature-release")


def canary_pair(n: int = 50, d: int = 2, kind: str = "opposed") -> CanaryPair:
    """The canary pair of an audit (u = e_1 throughout; D' = D + one record z_c = +u).

    ``opposed`` (default): D = n records z = -u; w0 = -0.6 u + 0.8 e_2. The mean gradient moves by
    exactly u/(n+1) at every w; both SOIs are unchanged (see the module docstring).

    ``zero``: D = n zero records (they contribute nothing to any gradient, SOI or batch sum), w0 = -u.
    Made for Poisson-subsampled sums: the canary's gradient -sigma(-<u, w0>) u = -0.73 u is the only
    signal and D's random batch size adds no variance along u.

    ``zero-orthogonal``: as ``zero`` with w0 = e_2 (orthogonal to the canary, margin 0). The canary
    then adds the largest possible SOI weight 1/4 to the Hessian and to H_qu, so it changes the
    trace of the SOI by 1/(4(n+1)) - the trace sensitivity 1/(4n) up to the n/(n+1) of the mean -
    and the trace and direction releases of double-noise Newton carry signal (gradient: -u/(2(n+1))).
    """
    if n < 2 or d < 2:
        raise ValueError(f"need n >= 2 and d >= 2; got n={n}, d={d}")
    if kind not in CANARIES:
        raise ValueError(f"canary kind {kind!r} is unknown; choose one of {', '.join(CANARIES)}")
    u = np.zeros(d)
    u[0] = 1.0
    w0 = np.zeros(d)
    if kind == "opposed":
        Z = np.tile(-u, (n, 1))
        w0[0], w0[1] = -0.6, 0.8
    else:
        Z = np.zeros((n, d))
        if kind == "zero":
            w0[0] = -1.0
        else:
            w0[1] = 1.0
    return CanaryPair(LogisticProblem(Z, f"audit-D-{kind}"), LogisticProblem(np.vstack([Z, u]), f"audit-D'-{kind}"),
                      u, w0, 1.0 / float(n) ** 2)


@dataclass(frozen=True)
class AuditMechanism:
    name: str                  # row label
    algorithm: str             # registry name of the production optimizer
    iterations: int = 1
    hyper: dict = field(default_factory=dict)
    levels: tuple = ("output",)
    note: str = ""
    canary: str = "opposed"    # see canary_pair
    pin_start: bool = True     # pin the run's first Gaussian draw (its random start) to the pair's w0
    calibration: str = "ledger"  # "ledger" (zCDP ledger sigma), "accountant" (RDP-calibrated
    #                              multipliers), "aop" or "cubic": how the broken variants are injected


def default_mechanisms() -> list[AuditMechanism]:
    mechs = [
        AuditMechanism("dp-gd", "dp-gd", 1, {}, ("output",), "T=1, step 4: one Gaussian release"),
        AuditMechanism("dp-gd-T5", "dp-gd", 5, {"step": 0.05}, ("output",),
                       "T=5, step 0.05 (small step keeps the canary's effect on w_T undamped)"),
    ]
    for name in ("hess-clip", "hess-add", "qu-clip", "qu-add"):
        mechs.append(AuditMechanism(name, name, 1, {}, ("output", "gradient-release"),
                                    "one full iteration: gradient, trace (adaptive lambda), direction"))
    mechs.append(AuditMechanism("damped-newton", "damped-newton", 1, {}, ("gradient-release", "output"),
                                "gradient + Hessian release; the damped step size is not private"))
    # --- SOI canary, subsampled methods, AOP and cubic Newton ------------------------------------
    # SOI canary (a record orthogonal to the start): excites the trace release of the adaptive
    # lambda; trace_frac = 0.9 (a production option) gives the trace enough budget to be auditable.
    for name in ("hess-clip", "qu-add"):
        mechs.append(AuditMechanism(f"{name}-soi", name, 1, {"trace_frac": 0.9}, ("trace-release", "output"),
                                    "SOI canary (zero records + one record orthogonal to w0); "
                                    "trace_frac 0.9; output = w0 - released direction",
                                    canary="zero-orthogonal"))
    # precond-dp-gd: opposed canary (B unchanged, +-u give the same u u^T: the output audits the
    # gradient release through P^-1) and the SOI canary, which moves B's entry (1, 1) by 1/(4(n+1));
    # precond_frac 0.9 (a production option) gives the curvature release enough budget to be auditable.
    mechs.append(AuditMechanism("precond-dp-gd", "precond-dp-gd", 1, {}, ("output", "gradient-release"),
                                "T=1, step 1: curvature release (unchanged by this canary) + one "
                                "gradient release through P^-1"))
    mechs.append(AuditMechanism("precond-dp-gd-soi", "precond-dp-gd", 1, {"precond_frac": 0.9},
                                ("curvature-release", "output"),
                                "SOI canary (zero records + one record orthogonal to w0); precond_frac 0.9",
                                canary="zero-orthogonal"))
    mechs.append(AuditMechanism("dp-sgd", "dp-sgd", 1, {}, ("output",),
                                "T=1, Poisson q = 5/51 (batch_frac 0.1), RDP-calibrated multiplier",
                                canary="zero", calibration="accountant"))
    mechs.append(AuditMechanism("dp-sgd-q1", "dp-sgd", 1, {"batch_frac": 1.0}, ("output",),
                                "T=1, batch_frac 1 (q = 1: no subsampling), RDP-calibrated multiplier",
                                canary="zero", calibration="accountant"))
    for name in ("minibatch-hess-clip", "minibatch-qu-add"):
        mechs.append(AuditMechanism(name, name, 1, {}, ("output", "gradient-release"),
                                    "T=1, Poisson q = 5/51 for gradient and SOI batches, RDP-calibrated pair",
                                    canary="zero", calibration="accountant"))
    # AOP: the output noise (sigma_out ~ 0.59 for n = 50) swamps the output; the perturbed minimiser
    # before it is the objective-perturbation release with its own claim eps_obj (docs/algorithms.md §4.2).
    mechs.append(AuditMechanism("aop", "aop", 1, {}, ("output", "objective-release"),
                                "approximate objective perturbation (Newton to 1/n^2 + output noise)",
                                pin_start=False, calibration="aop"))
    # Cubic Newton: ball diameter 0.1, where the model-gradient sensitivity bound (L0 + L1 D)/n =
    # 1.03/n is nearly attained by the opposed canary's change 1/(n+1) (at the default D = 10 the
    # bound is 3.65/n, 3.7x that change, and even half the noise is not refutable with this canary).
    mechs.append(AuditMechanism("cubic-newton", "cubic-newton", 1, {"max_inner": 20, "diameter": 0.1},
                                ("output", "gradient-release", "inner-releases"),
                                "T=1, 20 inner noisy model-gradient steps (max_inner 20), ball diameter 0.1",
                                calibration="cubic"))
    return mechs


def _accountant_hyper(mech: AuditMechanism, problem: LogisticProblem, epsilon: float, delta: float,
                      broken: str) -> dict:
    """Broken variants of the accountant-calibrated methods: hand-set multipliers (no code change).

    The calibrated multipliers are recomputed exactly as the production code does for this side's
    n and scaled by :func:`noise_factor`: ``half-noise`` / ``tenth-noise`` scale all of them by 1/2 /
    1/10, ``wrong-sensitivity`` divides the gradient's by 4 (noise for a 4x smaller sensitivity).
    Hand-set multipliers mark the ledger non-private; irrelevant here.
    """
    from ..algorithms.minibatch import MinibatchNewtonConfig, SgdConfig, _expected_batch
    from ..privacy.accountant import calibrate_poisson_gaussian, calibrate_two_mechanisms

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
    """Broken variants of AOP and cubic Newton, whose noise does not come from the ledger.

    Module-level patch of one noise-scale function for the duration of the trials (restored after),
    scaled by :func:`noise_factor`: AOP ``aop_parameters`` (sigma_obj as the ``objective`` release,
    sigma_out as the ``output`` release: half-noise / tenth-noise scale both, wrong-sensitivity only
    sigma_obj, i.e. the objective noise of a 4x smaller gradient sensitivity 2L/n); cubic Newton
    ``dp_cubic_solver`` (sigma of the inner ``model-gradient`` releases).
    """
    if broken == "none" or mech.calibration not in ("aop", "cubic"):
        yield
        return
    if mech.calibration == "aop":
        from ..algorithms import aop as module

        original = module.aop_parameters

        def replacement(*args, **kw):
            out = dict(original(*args, **kw))
            out["sigma_obj"] *= noise_factor(broken, "objective")
            out["sigma_out"] *= noise_factor(broken, "output")
            return out

        name = "aop_parameters"
    else:
        from ..algorithms import cubic_newton as module

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


@dataclass
class TrialBatch:
    W: np.ndarray                       # (trials, d) outputs
    grad_release_u: np.ndarray | None   # (trials,) <first gradient release, u> or None
    rho: float
    ledgers: list
    trace_release: np.ndarray | None = None   # (trials,) first released noisy trace or None
    hyper: dict = field(default_factory=dict)  # hyper-parameters actually run (broken variants)
    inner_releases: np.ndarray | None = None  # (trials,) cubic Newton: sum_i <g^_i - m_D(theta_i), u>
    objective_release: np.ndarray | None = None  # (trials,) AOP: <perturbed minimiser before output noise, u>
    curvature_release: np.ndarray | None = None  # (trials,) precond-dp-gd: released B~_11


def _first_gradient_release(problem: LogisticProblem, pair: CanaryPair, mech: AuditMechanism, hyper: dict,
                            contexts) -> np.ndarray:
    """<first released gradient, u> per trial, rebuilt from the recorded draws and noise scales."""
    out = np.empty(len(contexts))
    if mech.calibration == "accountant":   # minibatch Newton: (sum over the Poisson batch + z_g xi)/b_g
        from ..algorithms.minibatch import MinibatchNewtonConfig, _expected_batch, gradient_sum

        cfg = MinibatchNewtonConfig(**{k: v for k, v in hyper.items()
                                       if k in ("batch_grad", "batch_hess", "batch_frac", "grad_frac")})
        b_g = _expected_batch(cfg.batch_grad, problem.n, cfg.batch_frac, "batch_grad")
        for i, c in enumerate(contexts):
            z_g = (hyper["noise_multipliers"][0] if "noise_multipliers" in hyper
                   else float(c.ledger.events[0]["noise_multiplier_grad"]))
            idx = np.flatnonzero(c.rng.uniforms[0] < b_g / problem.n)
            noisy = gradient_sum(problem.batch(idx), pair.w0) + z_g * c.rng.draws[0]
            out[i] = (noisy @ pair.canary) / b_g
        return out
    g = problem.grad(pair.w0)
    reg = float(hyper.get("reg", 1e-8)) if mech.algorithm not in ("dp-gd", "precond-dp-gd") else 0.0
    g = g + reg * pair.w0
    # precond-dp-gd releases its curvature first: its first gradient is the second release (and draw)
    k = 1 if mech.algorithm == "precond-dp-gd" else 0
    for i, c in enumerate(contexts):
        if len(c.ledger.entries) <= k or c.ledger.entries[k].quantity != "gradient":
            raise RuntimeError(f"{mech.algorithm}: release {k} is not the gradient")
        out[i] = g @ pair.canary + c.ledger.returned[k] * (c.rng.draws[k] @ pair.canary)
    return out


def _cubic_inner_releases(pair: CanaryPair, mech: AuditMechanism, results) -> tuple[np.ndarray, np.ndarray]:
    """Cubic Newton (T = 1): the N inner releases, read from the production run's transcript [docs/algorithms.md §5].

    Algorithm 2 releases g^_i = m(theta_i) + sigma xi_i, m(theta) = g + H(theta - theta0)
    + (L2/2)||theta - theta0||(theta - theta0) the model gradient of this side's data, and moves to
    theta_{i+1} = Proj_W(theta_i - eta_i g^_i). The runs were made with ``record_releases`` (set by
    :func:`run_trials`), so each result's ``diagnostics["inner_releases"]`` holds the points theta_i
    and the releases g^_i exactly as the production code computed them (with the broken variant's
    sigma when patched); checked: one outer step of N = ``diagnostics["inner_steps"]`` releases, as
    many as the ledger was charged for.
    Returns per trial <g^_0, u> (the first release) and the transcript statistic
    sum_i <g^_i - m_D(theta_i), u>, where m_D (:func:`~dpnewton.algorithms.cubic_newton.model_gradient`)
    is the model gradient of D at the released theta_i (theta_0 = the run's start): a fixed function
    of the released transcript (theta_i are post-processing of earlier releases). On D it is
    sigma sum_i <xi_i, u>; on D' each term is shifted by the canary's change of the model gradient
    (-1/(n+1) for every i with the ``opposed`` canary: D and D' have the same Hessian), so for a
    constant shift it is the Neyman-Pearson statistic of the whole step's N releases (composition of
    N Gaussians, each at rho~/N).
    """
    from ..algorithms.cubic_newton import model_gradient

    if mech.iterations != 1:
        raise ValueError("the inner-release statistic covers T = 1 (one outer step)")
    first, total = np.empty(len(results)), np.empty(len(results))
    for k, r in enumerate(results):
        diag = r.diagnostics
        steps, N = diag["inner_releases"], diag["inner_steps"]
        shapes = {a.shape for a in steps[0]} if len(steps) == 1 else set()
        if shapes != {(N, pair.w0.size)} or len(r.ledger.entries) != N:
            raise RuntimeError(f"cubic Newton: expected one outer step of N = {N} recorded and charged releases")
        thetas, releases = steps[0]
        theta0, mu = thetas[0], diag["mu"]
        m = pair.D.margins(theta0)     # D's cubic model at the run's start
        g_D = pair.D.grad_from_margins(m) + mu * theta0
        H_D = pair.D.soi_from_margins(m, "hessian") + mu * np.eye(theta0.size)
        stat = 0.0
        for theta, released in zip(thetas, releases):
            stat += float((released - model_gradient(g_D, H_D, theta0, diag["L2"], theta)) @ pair.canary)
        first[k] = float(releases[0] @ pair.canary)
        total[k] = stat
    return first, total


def _aop_objective_release(problem: LogisticProblem, pair: CanaryPair, contexts, W: np.ndarray) -> np.ndarray:
    """AOP: <theta^, u> for the perturbed minimiser theta^ before the output noise [docs/algorithms.md §4.2].

    theta^ = output - sigma_out xi_out (the last recorded draw; sigma_out from the ledger event, i.e.
    the broken variant's when patched). Checked: ||grad J(theta^)|| <= the tolerance gamma the run met,
    with b = sigma_obj times the second-to-last draw (the objective noise, drawn once).
    """
    from ..algorithms.aop import aop_objective

    out = np.empty(len(contexts))
    for k, c in enumerate(contexts):
        event = c.ledger.events[0]
        if event["returned_zero"]:
            raise RuntimeError("AOP returned theta = 0 (epsilon >= 10.1): nothing to audit")
        theta_hat = W[k] - event["sigma_out"] * c.rng.draws[-1]
        b = event["sigma_obj"] * c.rng.draws[-2]
        _, grad = aop_objective(problem, event["Lambda"], b)(theta_hat)
        if float(np.linalg.norm(grad)) > event["gamma"] * (1.0 + 1e-6):
            raise RuntimeError("AOP: the rebuilt minimiser does not meet the run's tolerance")
        out[k] = float(theta_hat @ pair.canary)
    return out


def _first_trace_release(problem: LogisticProblem, pair: CanaryPair, mech: AuditMechanism, contexts) -> np.ndarray:
    """The first released noisy trace tr H(w0) + s_tr xi per trial (double-noise, adaptive lambda)."""
    soi = "qu" if mech.algorithm.startswith("qu") else "hessian"
    tr = float(np.trace(problem.soi_from_margins(problem.margins(pair.w0), soi)))
    out = np.empty(len(contexts))
    for i, c in enumerate(contexts):
        if len(c.ledger.entries) < 2 or c.ledger.entries[1].quantity != "trace":
            raise RuntimeError(f"{mech.algorithm}: the second release is not the trace")
        out[i] = tr + c.ledger.returned[1] * float(c.rng.draws[1])
    return out


def _first_curvature_release(problem: LogisticProblem, pair: CanaryPair, mech: AuditMechanism,
                             contexts) -> np.ndarray:
    """precond-dp-gd: the released B~ entry at the canary's coordinate (u = e_1: entry (1, 1), the
    first of the upper-triangle draw), B_11 + s_B xi_0, per trial; B = Z^T Z/(4n) of this side."""
    from ..algorithms.precond import bohning_bound

    k = int(np.flatnonzero(pair.canary)[0])
    if pair.canary[k] != 1.0 or k != 0:
        raise RuntimeError("the curvature statistic assumes the canary u = e_1")
    b11 = float(bohning_bound(problem)[0, 0])
    out = np.empty(len(contexts))
    for i, c in enumerate(contexts):
        if not c.ledger.entries or c.ledger.entries[0].quantity != "curvature":
            raise RuntimeError(f"{mech.algorithm}: the first release is not the curvature")
        out[i] = b11 + c.ledger.returned[0] * float(c.rng.draws[0][0])
    return out


def run_trials(pair: CanaryPair, mech: AuditMechanism, side: str, trials: int, epsilon: float,
               conversion: str = "gdp", broken: str = "none", seed: int = 0) -> TrialBatch:
    """Run the production optimizer ``trials`` times on D (side "D") or D' (side "D'")."""
    _check_broken(broken)
    if side not in ("D", "D'"):
        raise ValueError(f"side={side!r} must be 'D' or \"D'\"")
    if trials < 1:
        raise ValueError(f"trials={trials!r} must be >= 1")
    problem = pair.D if side == "D" else pair.D_prime
    spec = get_algorithm(mech.algorithm)
    rho = epsilon_to_rho(epsilon, pair.delta, conversion)
    base = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        [seed, zlib.crc32(mech.name.encode()), 0 if side == "D" else 1, BROKEN_VARIANTS.index(broken), trials,
         mech.iterations])))
    ledger_broken = broken if mech.calibration == "ledger" else "none"   # the others: see _patched_noise
    hyper = (_accountant_hyper(mech, problem, float(epsilon), pair.delta, broken)
             if mech.calibration == "accountant" else dict(mech.hyper))
    cubic_releases = mech.calibration == "cubic" and bool({"gradient-release", "inner-releases"} & set(mech.levels))
    if cubic_releases:    # _cubic_inner_releases reads the inner releases from the runs' transcripts
        hyper["record_releases"] = True
    contexts = []
    for i in range(trials):
        ident = RunIdentity(problem.name, mech.algorithm, float(epsilon), i, mech.iterations)
        contexts.append(RunContext(ident, float(epsilon), pair.delta, conversion, rho, AuditLedger(rho, ledger_broken),
                                   PinnedStartRng(base, pair.w0 if mech.pin_start else None)))
    with threadpool_limits(1), _patched_noise(mech, broken):
        results = spec.run(problem, contexts, dict(hyper))
    W = np.stack([r.w for r in results])
    grad_u = trace = inner = objective = None
    if cubic_releases:
        grad_u, inner = _cubic_inner_releases(pair, mech, results)
    elif "gradient-release" in mech.levels:
        grad_u = _first_gradient_release(problem, pair, mech, hyper, contexts)
    if "trace-release" in mech.levels:
        trace = _first_trace_release(problem, pair, mech, contexts)
    if "objective-release" in mech.levels:
        objective = _aop_objective_release(problem, pair, contexts, W)
    curvature = (_first_curvature_release(problem, pair, mech, contexts)
                 if "curvature-release" in mech.levels else None)
    return TrialBatch(W, grad_u, rho, [c.ledger for c in contexts], trace, hyper, inner, objective, curvature)


def statistic(batch: TrialBatch, pair: CanaryPair, level: str) -> np.ndarray:
    """Per-trial scalar, larger on D' in expectation (the canary pulls w towards +u)."""
    if level == "output":
        return batch.W @ pair.canary
    if level == "gradient-release":
        return -batch.grad_release_u
    if level == "trace-release":     # the canary adds SOI weight: larger trace on D'
        return batch.trace_release
    if level == "inner-releases":    # the canary lowers every inner model gradient along u
        return -batch.inner_releases
    if level == "objective-release":  # the canary pulls the perturbed minimiser towards +u
        return batch.objective_release
    if level == "curvature-release":  # the canary adds u u^T/(4n) to B: larger B~_11 on D'
        return batch.curvature_release
    raise ValueError(f"level={level!r} is unknown; choose one of {', '.join(LEVELS)}")


def release_rho_share(mech: AuditMechanism, level: str) -> float:
    """Share of the run's rho spent on what the statistic sees (gradient share of step 0 for releases)."""
    if level == "output" or mech.algorithm in ("dp-gd", "dp-gd-oracle"):
        return 1.0 if level == "output" else 1.0 / mech.iterations
    if mech.algorithm == "precond-dp-gd":
        from ..algorithms.precond import PRECOND_FRAC

        return (1.0 - float(mech.hyper.get("precond_frac", PRECOND_FRAC))) / mech.iterations
    gf = float(mech.hyper.get("grad_frac", 0.7))
    return gf / mech.iterations


def claimed_epsilon_of_share(rho: float, share: float, delta: float) -> float:
    """epsilon at delta of a share of rho for a composition of Gaussians (exact GDP conversion)."""
    return rho_to_epsilon(rho * share, delta, "gdp") if share > 0 else 0.0


def claimed_epsilon_of_level(mech: AuditMechanism, level: str, batch: TrialBatch, pair: CanaryPair,
                             epsilon: float) -> float:
    """The claim that covers what the statistic of ``level`` sees (same delta as the run).

    ``output``: the run's epsilon (for zCDP-ledger methods via the exact GDP conversion of its rho,
    which is the claimed epsilon itself when the run's conversion is ``gdp``). A single release of a
    ledger method: the exact GDP epsilon of that release's rho (read from the correct ledger). The
    first gradient release of a minibatch method: the RDP accountant's epsilon of that one
    subsampled Gaussian (its q and calibrated multiplier, one step). Cubic Newton's N inner releases of
    one outer step: the GDP epsilon of rho/T. AOP's perturbed minimiser: eps_obj of AOP's split (its
    guarantee holds at delta_obj < delta, so a lower bound computed at delta that exceeds eps_obj
    refutes it as well, epsilon(delta) being non-increasing in delta).
    """
    if level == "output":
        if mech.calibration in ("accountant", "aop"):
            return float(epsilon)
        return claimed_epsilon_of_share(batch.rho, 1.0, pair.delta)
    if level == "objective-release":
        return float(batch.ledgers[0].events[0]["eps_obj"])
    if level == "inner-releases":
        return claimed_epsilon_of_share(batch.rho, 1.0 / mech.iterations, pair.delta)
    if mech.calibration == "accountant":
        from ..algorithms.minibatch import MinibatchNewtonConfig, _expected_batch
        from ..privacy.accountant import accountant_epsilon, calibrate_two_mechanisms

        cfg = MinibatchNewtonConfig(**{k: v for k, v in mech.hyper.items()
                                       if k in ("batch_grad", "batch_hess", "batch_frac", "grad_frac")})
        n = pair.D.n
        b_g = _expected_batch(cfg.batch_grad, n, cfg.batch_frac, "batch_grad")
        b_h = _expected_batch(cfg.batch_hess, n, cfg.batch_frac, "batch_hess")
        z_g = calibrate_two_mechanisms(b_g / n, b_h / n, mech.iterations, epsilon, pair.delta,
                                       cfg.grad_frac).multipliers[0]
        return float(accountant_epsilon([b_g / n], [z_g], 1, pair.delta))
    if mech.calibration == "ledger" and level == "gradient-release":
        return claimed_epsilon_of_share(batch.rho, release_rho_share(mech, level), pair.delta)
    index = {"gradient-release": 0, "trace-release": 1, "curvature-release": 0}[level]
    entry = batch.ledgers[0].entries[index]
    return claimed_epsilon_of_share(batch.rho, entry.rho / batch.rho, pair.delta)


__all__ = ["AuditLedger", "BROKEN_VARIANTS", "GRADIENT_QUANTITIES", "noise_factor", "PinnedStartRng", "CanaryPair",
           "canary_pair", "AuditMechanism", "default_mechanisms", "run_trials", "statistic", "TrialBatch",
           "claimed_epsilon_of_level", "CANARIES", "LEVELS"]
