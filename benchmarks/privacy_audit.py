"""Empirical privacy audit of every optimizer: writes benchmarks/results/privacy_audit.csv and
docs/privacy_audit.md (all but its hand-written small-n and softmax sections, which are kept).

    python benchmarks/privacy_audit.py [--trials 10000] [--epsilon 3] [--n 50] [--d 2] [--seed 0]

For each audited mechanism (see dpnewton.audit.mechanisms.default_mechanisms) and each variant
(correct, half-noise, wrong-sensitivity, tenth-noise) the production optimizer runs ``trials`` times on D and on
D' = D + canary; the reported number is a 95% Clopper-Pearson lower bound on epsilon from a
threshold test chosen on half of the trials and evaluated on the other half, and for the Gaussian
mechanisms a 95% mu-GDP lower bound and its epsilon (dpnewton.audit.gdp). The doc's grey-box section
is computed when the doc is written (dpnewton.audit.greybox, a few seconds).
"""

from __future__ import annotations

import argparse
import csv
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy
from scipy import optimize

from dpnewton.algorithms.aop import aop_parameters
from dpnewton.algorithms.objpert import objpert_parameters
from dpnewton.algorithms.cubic_newton import lipschitz_constants
from dpnewton.audit import BROKEN_VARIANTS, audit_mechanism, default_mechanisms, epsilon_lower_bound, find_mechanism
from dpnewton.audit.bounds import gaussian_epsilon_at_delta
from dpnewton.audit.distinguisher import threshold_audit
from dpnewton.audit.gdp import gdp_audit
from dpnewton.audit.greybox import GREYBOX_VARIANTS, LIBRARY_RELATION, BENCHMARK_RELATION, greybox_audit, greybox_cases
from dpnewton.audit.greybox_preprocessing import LAWS as RANGE_LAWS, ranges_greybox_audit
from dpnewton.audit.greybox_softmax import softmax_greybox_audit
from dpnewton.multinomial import METHODS as SOFTMAX_METHODS
from dpnewton.privacy import epsilon_to_rho

REPO = Path(__file__).resolve().parents[1]

CSV_PATH = REPO / "benchmarks" / "results" / "privacy_audit.csv"
DOC_PATH = REPO / "docs" / "privacy_audit.md"
#: the doc's hand-written tail (the small-n and softmax audits' results), kept when the doc is rewritten
KEPT_SECTION = "## Small n"
GDP_FLOATS = ("mu_claimed", "mu_audited_part", "mu_lb", "epsilon_lb_gdp")


def _fmt_lb(r: dict) -> str:
    text = f"{r['epsilon_lb']:.2f}"
    if r["violates_claim"]:
        return f"**{text}**"
    if r["violates_part_claim"]:
        return f"*{text}*"
    return text


def _read_csv(path: Path) -> list[dict]:
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            for k in ("epsilon", "delta", "rho", "epsilon_audited_part", "epsilon_lb", "threshold"):
                row[k] = float(row[k])
            for k in GDP_FLOATS:     # blank in rows of the non-Gaussian mechanisms
                row[k] = float(row.get(k) or "nan")
            for k in ("trials_per_side", "n", "d", "iterations", "false_pos", "false_neg", "n_eval"):
                row[k] = int(row[k])
            for k in ("violates_claim", "violates_part_claim", "violates_gdp_claim", "violates_gdp_part_claim"):
                row[k] = row.get(k, "False") == "True"
            out.append(row)
    return out


def _in_registry_order(rows: list[dict]) -> list[dict]:
    """``rows`` by mechanism in the order of the audit's table (:func:`default_mechanisms`), stable within one."""
    order = {m.name: k for k, m in enumerate(default_mechanisms())}
    return sorted(rows, key=lambda r: order.get(r["mechanism"], len(order)))


def _aop_power(epsilon: float, n: int) -> dict:
    """Why AOP's half-noise is undetectable (docs/algorithms.md §4.2): mu of its objective noise per record.

    Sum form of AOP's objective (times n): sum_i l(theta; z_i) + Lambda/2 ||theta||^2 + <B, theta>,
    B ~ N(0, sB^2), sB = n sigma_obj = 2L (1 + sqrt(2 log(1/delta_obj)))/eps_p, independent of n. Adding
    a record shifts B by grad l(theta; z_c), of norm < L = 1 under add/remove (2L is the replace-one
    bound the calibration uses). With the opposed canary theta sits near D's minimiser t u,
    n sigmoid(t) + Lambda t = 0, where |grad l(theta; z_c)| = sigmoid(-t).
    """
    delta = 1.0 / n**2
    p = aop_parameters(epsilon, delta, n, 1.0 / n**2)
    lam, s_b = p["Lambda"], n * p["sigma_obj"]
    t = optimize.brentq(lambda x: n / (1.0 + math.exp(-x)) + lam * x, -50.0, 0.0)
    g_c = 1.0 / (1.0 + math.exp(t))
    curv = n * g_c * (1.0 - g_c) + lam                 # sum-form Hessian along u at t
    sd_theta, shift_theta = s_b / curv, g_c / curv
    out = {"sigma_obj": p["sigma_obj"], "sigma_out": p["sigma_out"], "Lambda": lam, "t": t, "g_c": g_c,
           "eps_obj": p["eps_obj"], "eps_p": p["eps_p"], "eps_out": p["eps_out"],
           "mu_calibrated": 2.0 / s_b, "sd_theta": sd_theta, "shift_theta": shift_theta}
    for name, f_obj, f_out in (("none", 1, 1), ("half-noise", 2, 2), ("wrong-sensitivity", 4, 1),
                               ("tenth-noise", 10, 10)):
        mu_worst, mu_canary = f_obj / s_b, f_obj * g_c / s_b
        out[name] = {"mu_worst": mu_worst, "eps_worst": gaussian_epsilon_at_delta(mu_worst, delta),
                     "mu_canary": mu_canary, "eps_canary": gaussian_epsilon_at_delta(mu_canary, delta),
                     "mu_output": shift_theta / math.hypot(sd_theta / f_obj, p["sigma_out"] / f_out)}
    return out


def _objpert_power(epsilon: float, n: int, d: int) -> dict:
    """Why the audit has power on objpert (docs/algorithms.md §15): in sum form the objective is
    sum_i l(theta; z_i) + Lambda/2 ||theta||^2 + <b, theta> with b ~ N(0, sigma^2 I). With the opposed
    canary D's n records z_i = -u pull theta^ to t u, n sigmoid(t) + Lambda t = 0, where the canary's
    |l'| = sigmoid(-t) < L = 1, so the canary moves b by sigmoid(-t) u: mu = sigmoid(-t)/sigma (x2 for
    half the noise)."""
    delta = 1.0 / n**2
    p = objpert_parameters(epsilon, delta, n, d=d)
    lam = p["Lambda"]
    t = optimize.brentq(lambda x: n / (1.0 + math.exp(-x)) + lam * x, -50.0, 0.0)
    g_c = 1.0 / (1.0 + math.exp(t))
    mu = g_c / p["sigma"]
    return {**p, "t": t, "g_c": g_c, "mu_canary": mu, "eps_canary": gaussian_epsilon_at_delta(mu, delta),
            "mu_half": 2 * mu, "eps_half": gaussian_epsilon_at_delta(2 * mu, delta)}


def _cubic_power(epsilon: float, n: int, diameter: float) -> dict:
    """Cubic Newton (T = 1, N inner releases, docs/algorithms.md §5): the opposed canary moves every inner model
    gradient by 1/(n+1) against the stated sensitivity (L0 + L1 D)/n, so the N releases together
    give mu = sqrt(2 rho) (1/(n+1)) / ((L0 + L1 D)/n) (sigma = sens/sqrt(2 rho/N))."""
    delta = 1.0 / n**2
    L0, L1, _ = lipschitz_constants(0.01, diameter)
    ratio = (1.0 / (n + 1)) / ((L0 + L1 * diameter) / n)
    mu = math.sqrt(2.0 * epsilon_to_rho(epsilon, delta, "gdp")) * ratio
    return {"sens_n": L0 + L1 * diameter, "ratio": ratio,
            **{name: (f * mu, gaussian_epsilon_at_delta(f * mu, delta))
               for name, f in (("none", 1), ("half-noise", 2), ("wrong-sensitivity", 4), ("tenth-noise", 10))}}


def _time_statement(total_seconds: float, audited: list[str] | None) -> str:
    machine = "on a shared, loaded 2-core machine"
    if audited is None:
        return f"{total_seconds:.0f} s in total {machine}"
    return (f"the last invocation, `--only {' '.join(audited)}`, took {total_seconds:.0f} s {machine}; the other "
            "rows are kept from earlier invocations")


def write_doc(rows: list[dict], args, total_seconds: float, audited: list[str] | None = None) -> bool:
    """Rewrite docs/privacy_audit.md from the CSV rows; ``total_seconds`` is the time of this invocation's
    audits, of the mechanisms ``audited`` (None: all of them)."""
    rows = _in_registry_order(rows)
    by_key = {(r["mechanism"], r["level"], r["broken"]): r for r in rows}
    mechs = {m.name: m for m in default_mechanisms()}
    first = next((r for r in rows if not math.isnan(r["rho"])), rows[0])   # a zCDP row states the rho
    broken_variants = BROKEN_VARIANTS[1:]
    aop = _aop_power(args.epsilon, args.n)
    objp = _objpert_power(args.epsilon, args.n, args.d)
    cubic_d = find_mechanism("cubic-newton").hyper["diameter"]
    cubic, cubic_default = _cubic_power(args.epsilon, args.n, cubic_d), _cubic_power(args.epsilon, args.n, 10.0)
    dp_gd_mu = math.sqrt(2.0 * epsilon_to_rho(args.epsilon, 1.0 / args.n**2, "gdp")) * args.n / (args.n + 1)
    lines = [
        "# Empirical privacy audit",
        "",
        "Four parts: the black-box threshold audit of every card's audit rows (Set-up, Results, Reading); "
        "its Gaussian-DP bound for the Gaussian mechanisms; the grey-box sensitivity test of every release "
        "(same seed, coupled replay on a neighbour); the small-n audit of the library's guarantee.",
        "",
        f"Generated by `python benchmarks/privacy_audit.py --trials {args.trials} --epsilon {args.epsilon:g} "
        f"--n {args.n} --d {args.d} --seed {args.seed}` (numpy {np.__version__}, scipy {scipy.__version__}, "
        f"Python {platform.python_version()}; {_time_statement(total_seconds, audited)}). "
        "Raw rows: `benchmarks/results/privacy_audit.csv`. One mechanism at a time: `dpnewton audit MECHANISM "
        f"[--trials N] [--epsilon E] [--broken {'|'.join(BROKEN_VARIANTS)}] [--json]`.",
        "",
        "## Set-up",
        "",
        "* Neighbouring datasets (add/remove one record, [P Def. 3.1]); u = e_1, "
        f"d = {args.d}, |D| = n = {args.n}, D' = D + one canary record z_c = +u. Each side runs the optimizer "
        "with its own n (D' uses n+1). Three canary pairs (column *canary*):",
        "  * `opposed`: D = n records z_i = -u, start w0 = -0.6 u + 0.8 e_2. Because sigma(m) + sigma(-m) = 1 "
        "the mean gradient of D' differs from that of D by exactly u/(n+1) at every w (|grad l(w; z_c) - "
        "mean_D| = 1, the per-record gradient bound, over n+1); the SOIs (Hessian and QU, whose weights are "
        "even in the margin) are identical on D and D', so the trace and direction releases carry no signal "
        "for this canary. (It is not the largest change the add/remove relation allows when each side "
        "normalises by its own n: two unit records at an angle give |grad l(w; z_c) - mean_D| up to 1.10 at "
        "||w|| = 1 and 1.62 at ||w|| = 5, i.e. above the code's 1/n; not exploited here.)",
        "  * `zero`: D = n zero records, w0 = -u. For Poisson-subsampled sums: the zero records contribute "
        "nothing (so D's random batch size adds no variance along u) and the canary's gradient is "
        "-sigma(1) u = -0.73 u, 73% of the per-example sensitivity 1 (the most a unit-norm start allows).",
        "  * `zero-orthogonal` (the **SOI canary**): D = n zero records, w0 = e_2, orthogonal to the canary. The "
        "canary sits at margin 0 where the SOI weight takes its maximum 1/4, so it changes tr H (and tr H_qu) "
        "by 1/(4(n+1)), the trace sensitivity 1/(4n) up to n/(n+1), and it changes the Hessian (u u^T/(4(n+1))) "
        "that the direction uses; its gradient change is u/(2(n+1)).",
        f"* Claimed privacy: epsilon = {args.epsilon:g} at delta = 1/n^2 = {first['delta']:.3g}. zCDP-ledger "
        f"methods get rho = {first['rho']:.4f} from the exact GDP conversion (`conversion=\"gdp\"`, the largest "
        "rho any of the package's conversions grants, so the claim is as tight as the accounting allows). The "
        "minibatch methods (dp-sgd, minibatch-*) calibrate their multipliers with the subsampled-Gaussian RDP "
        "accountant to (epsilon, delta) directly, AOP and objpert split (epsilon, delta) themselves; their rho "
        "column is empty.",
        "* What runs: the production optimizer (`get_algorithm(name).run`) on crafted `RunContext`s. Every trial "
        "starts at the pair's w0 (a generator stand-in pins the start draw and records the later Gaussian and "
        f"uniform draws; AOP draws no start). {args.trials} trials per side.",
        '* Broken variants (no production code is modified or patched; one factor table, `noise_factor`, '
        'applied by one ledger): `half-noise` = every noise scale x 1/2, `tenth-noise` = every noise scale x '
        '1/10, `wrong-sensitivity` = the gradient-type noise x 1/4 (gradients, inner model gradients and the '
        'objective-perturbation noise b, calibrated with the SOI bound 1/(4n) instead of 1/n), other noise '
        "correct. `tenth-noise` exists because AOP's `half-noise` cannot be detected by any audit (see "
        "Reading). How they are injected: every trial's ledger is an `AuditLedger(rho, broken)`, the "
        'production `PrivacyLedger` that records its entries and accounting events as in production (they '
        'keep the correct calibration, which is the claim) and scales only the noise scales it hands back to '
        'the run, at the two places a run takes one from its ledger:',
        "  * the sigma `charge` returns: the releases of the methods with a zCDP privacy plan (the card's "
        '`plan`: dp-gd, double-noise Newton, damped Newton, precond-dp-gd);',
        '  * the scale `PrivacyLedger.noise(quantity, sigma)` passes through (the identity in production, so '
        'production runs are unchanged bit for bit): every noise scale that does not come from `charge` goes '
        'through it where it is drawn. The RDP-calibrated multipliers of the accountant-calibrated methods '
        "(dp-sgd: the gradient's; minibatch-*: the gradient's and the direction's, `wrong-sensitivity` scales"
        " the gradient's only), AOP's and objpert's sigma_obj (the objective noise; objpert's sum-form "
        "sigma/n) and sigma_out (`wrong-sensitivity`: sigma_obj only), and cubic Newton's sigma of the inner "
        'model-gradient releases.',
        '* The audited rows, their levels and how each run is calibrated are read from the algorithm cards '
        '(`AlgorithmSpec.audit`; a zCDP `plan`, else one-shot if not `iterative`, else accountant-'
        "calibrated), in registry order; the released quantity a level reads is located by the card's plan "
        "(releases in charge order), its regulariser and SOI by the run's configuration. A third-party card "
        'is audited like the built-in ones.',
        "* Test: threshold on a scalar statistic; threshold and direction of the bound chosen on half of each "
        "side's trials, false-positive/false-negative counts taken on the other half; epsilon_lb = "
        "max(log((1-delta-FNR_u)/FPR_u), log((1-delta-FPR_u)/FNR_u)) for the chosen direction, with one-sided "
        "Clopper-Pearson upper bounds at level alpha/2 each (jointly 95%), floored at 0.",
        "* Levels (all from the same runs): `output` = the whole output w_T, statistic <w_T, u> (for T = 1 "
        "double-noise Newton this is w0 minus the released noisy direction, i.e. the direction release "
        "itself); `gradient-release` = the first noisy gradient released (double-noise/damped Newton: g~_0; "
        "minibatch Newton: (Poisson batch sum + z_g xi)/b_g, rebuilt from the recorded coin flips and draw; "
        "cubic Newton: the first of the N inner noisy model gradients), statistic -<g~_0, u>; `trace-release` = "
        "the first released noisy trace tr H(w0) + s_tr xi of the adaptive lambda, statistic itself; "
        "`inner-releases` (cubic Newton, T = 1) = all N noisy model gradients g^_i of Algorithm 2, recorded "
        "by the production solver itself (`CubicNewtonConfig.record_releases`, audit-only; it changes no number "
        "of the run), statistic "
        "-sum_i <g^_i - m_D(theta_i), u> with m_D the model gradient of D at the recorded iterate (a fixed "
        "function of the transcript; with the `opposed` canary every term is shifted by the same 1/(n+1), so "
        "this is the likelihood-ratio statistic of the N composed Gaussians); `objective-release` (AOP, objpert) = the "
        "perturbed minimiser theta^ before the output noise (output - sigma_out xi_out; the rebuild checks "
        "||grad J(theta^)|| <= the run's tolerance), statistic <theta^, u>. A release holds only part of the "
        "budget; its own claim is the column *claimed eps of audited part* (exact GDP epsilon of its rho for "
        "ledger methods and cubic Newton; the RDP accountant's epsilon of that one subsampled Gaussian for "
        "the minibatch gradient; AOP's and objpert's eps_obj, which holds at delta_obj = 0.99 delta, for theta^).",
        "",
        "## Results",
        "",
        "| mechanism | canary | level | T | claimed eps | delta | claimed eps of audited part | eps lower bound "
        "(correct) | trials/side | " + " | ".join(f"eps LB {b}" for b in broken_variants) + " |",
        "|---|---|---|---|---|---|---|---|---|" + "---|" * len(broken_variants),
    ]
    seen = []
    for r in rows:
        if (r["mechanism"], r["level"]) not in seen:
            seen.append((r["mechanism"], r["level"]))
    for name, level in seen:
        ok = by_key[(name, level, "none")]
        broken_cells = [by_key.get((name, level, b)) for b in broken_variants]
        canary = mechs[name].canary if name in mechs else "opposed"
        lines.append(f"| {name} | {canary} | {level} | {ok['iterations']} | {ok['epsilon']:g} | {ok['delta']:.3g} | "
                     f"{ok['epsilon_audited_part']:.2f} | {_fmt_lb(ok)} | {ok['trials_per_side']} | "
                     + " | ".join(_fmt_lb(r) if r else "n/a" for r in broken_cells) + " |")
    max_lb = epsilon_lower_bound(0, first["n_eval"], 0, first["n_eval"], first["delta"])
    correct_ok = all(not r["violates_claim"] and not r["violates_part_claim"] for r in rows if r["broken"] == "none")
    mech_names = list(dict.fromkeys(r["mechanism"] for r in rows))

    def best_row(name, broken):
        hits = [r for r in rows if r["mechanism"] == name and r["broken"] == broken]
        return max(hits, key=lambda r: (r["violates_claim"], r["violates_part_claim"], r["epsilon_lb"])) if hits \
            else None

    def detection(name, broken):
        best = best_row(name, broken)
        if best is None:
            return "n/a"
        what = ("refuted" if best["violates_claim"] else "release only" if best["violates_part_claim"]
                else "not detected")
        return f"{what} ({best['level']} {best['epsilon_lb']:.2f})"

    def refuted(name, broken):
        best = best_row(name, broken)
        return best is not None and best["violates_claim"]

    flagged = {b: [m for m in mech_names if refuted(m, b)] for b in broken_variants}
    unflagged = {b: [m for m in mech_names if not refuted(m, b)] for b in broken_variants}
    every_flagged = all(any(refuted(m, b) for b in broken_variants) for m in mech_names)

    def refuted_count(broken):
        missed = ", ".join(f"`{m}`" for m in unflagged[broken])
        return (f"`{broken}` refuted for {len(flagged[broken])} of {len(mech_names)}"
                + (f" (not for: {missed})." if missed else " (all)."))

    def lb(name, level, broken="none"):
        r = by_key.get((name, level, broken))
        return f"{r['epsilon_lb']:.2f}" if r else "n/a"

    def part(name, level):
        r = by_key.get((name, level, "none"))
        return f"{r['epsilon_audited_part']:.2f}" if r else "n/a"

    lines += [
        "",
        "Bold: lower bound above the claimed epsilon of the whole run (claim refuted at 95% confidence). "
        "Italic: above the claim of the audited release only (that release's calibration is refuted). "
        f"{max_lb:.2f} is the largest bound {first['n_eval']} evaluation trials per side can certify (no error "
        "on either side).",
        "",
        "## Reading",
        "",
        f"* Every correct mechanism stays below its claim and below the claim of the audited part: "
        f"**{'yes' if correct_ok else 'NO'}**.",
        f"* Every mechanism has a broken variant refuted (lower bound above the whole-run claim at some level): "
        f"**{'yes' if every_flagged else 'NO'}**. "
        + " ".join(refuted_count(b) for b in broken_variants),
        "* Detection of the broken variants (best level; *refuted* = above the whole-run claim, *release only* "
        "= above the audited release's own claim only):",
        "",
        "| mechanism | " + " | ".join(broken_variants) + " |",
        "|---|" + "---|" * len(broken_variants),
        *[f"| {m} | " + " | ".join(detection(m, b) for b in broken_variants) + " |" for m in mech_names],
        "",
        "* DP-GD with T = 1 is a single Gaussian release whose sensitivity the canary attains, so its correct "
        "lower bound is the best a threshold test on this many trials can certify for a tight Gaussian "
        "mechanism; the gap to the claim comes from delta = 1/n^2 (the claim is about events of probability "
        "~delta, far below what 10^4 trials can resolve) and from the Clopper-Pearson margins.",
        "* Double-noise Newton, `opposed` canary: the whole output has almost no power (the direction noise "
        "is larger than the canary's effect, and the SOI-based releases do not see this canary); the gradient "
        "release is where `wrong-sensitivity` is caught.",
        f"* **SOI canary** (`hess-clip-soi`, `qu-add-soi`, trace_frac 0.9 so that the trace release holds "
        f"27% of rho): the trace release is now excited (its mean moves by 1/(4(n+1)), checked in "
        f"tests/audit/test_audit.py). Correct lower bounds {lb('hess-clip-soi', 'trace-release')} / "
        f"{lb('qu-add-soi', 'trace-release')} against the release's own claim "
        f"{part('hess-clip-soi', 'trace-release')}; `half-noise` (twice the release's mu) gives "
        f"{lb('hess-clip-soi', 'trace-release', 'half-noise')} / {lb('qu-add-soi', 'trace-release', 'half-noise')}. "
        "`wrong-sensitivity` touches only the gradient, so the trace rows are a control (no change expected). "
        f"The direction release is audited through `output` of the same runs (for T = 1, w_1 = w0 - released "
        f"direction; correct {lb('hess-clip-soi', 'output')} / {lb('qu-add-soi', 'output')}), but with this canary "
        "D's SOI is 0 and that of D' is u u^T/(4(n+1)), below lambda, so the direction changes mostly through the "
        "gradient: a weak audit of the direction's sensitivity bound ||g~||/(4n lambda^2 -/+ lambda). A canary "
        "attaining that bound (large ||g~||, lambda at its floor, the SOI change on the smallest eigenvalue) "
        "was not attempted.",
        f"* DP-SGD, Poisson q = 5/51, one step: correct {lb('dp-sgd', 'output')}, half-noise "
        f"{lb('dp-sgd', 'output', 'half-noise')}, wrong-sensitivity {lb('dp-sgd', 'output', 'wrong-sensitivity')}. "
        "The canary is in the batch with probability q only, so the distinguishing event must sit in the tail "
        "where the shifted Gaussian dominates the mixture; the correct mechanism's bound is therefore far "
        "below its claim (weak audit: it cannot test how tight the RDP accountant is), but 4x too little "
        "noise is still refuted. Without subsampling (`dp-sgd-q1`, batch_frac 1, the same accountant path at "
        f"q = 1): correct {lb('dp-sgd-q1', 'output')}, half-noise {lb('dp-sgd-q1', 'output', 'half-noise')}, "
        f"wrong-sensitivity {lb('dp-sgd-q1', 'output', 'wrong-sensitivity')}; lower than DP-GD's because "
        "this canary's gradient reaches only 73% of the per-example sensitivity (unit-norm start).",
        f"* Minibatch double-noise Newton (q = 5/51 for both batches): correct output "
        f"{lb('minibatch-hess-clip', 'output')} / {lb('minibatch-qu-add', 'output')}, gradient release "
        f"{lb('minibatch-hess-clip', 'gradient-release')} / {lb('minibatch-qu-add', 'gradient-release')} "
        "(hess-clip / qu-add); the same subsampling caveat applies (weak for the correct mechanism, "
        "`wrong-sensitivity` refuted). minibatch-hess-add and minibatch-qu-clip share the code path (only the "
        "modification differs) and are not audited separately.",
        f"* AOP (`objective-release` = the perturbed minimiser, claim eps_obj = {part('aop', 'objective-release')}): "
        f"correct {lb('aop', 'objective-release')}, half-noise {lb('aop', 'objective-release', 'half-noise')}, "
        f"wrong-sensitivity {lb('aop', 'objective-release', 'wrong-sensitivity')}, tenth-noise "
        f"{lb('aop', 'objective-release', 'tenth-noise')} (output level: {lb('aop', 'output')} / "
        f"{lb('aop', 'output', 'half-noise')} / {lb('aop', 'output', 'wrong-sensitivity')} / "
        f"{lb('aop', 'output', 'tenth-noise')}). Why `half-noise` cannot be flagged: in sum form AOP minimises "
        f"sum_i l(theta; z_i) + Lambda/2 ||theta||^2 + <B, theta> with Lambda = {aop['Lambda']:.2f} and "
        f"B ~ N(0, (n sigma_obj)^2), n sigma_obj = {args.n * aop['sigma_obj']:.2f} independent of n; adding a "
        "record shifts B by grad l(theta; z_c), of norm < L = 1, while sigma_obj is calibrated for the "
        "replace-one bound 2L/n with the conservative Gaussian factor (1 + sqrt(2 log(1/delta_obj)))/eps_p. "
        f"The calibration's mu is {aop['mu_calibrated']:.3f}; the add/remove worst case is "
        f"mu = {aop['none']['mu_worst']:.3f} (exact GDP epsilon {aop['none']['eps_worst']:.2f} at delta). "
        f"Halving the noise gives at worst mu = {aop['half-noise']['mu_worst']:.3f}, epsilon "
        f"{aop['half-noise']['eps_worst']:.2f}; adding the Jacobian term (which Lambda bounds by eps_obj - eps_p "
        f"= {aop['eps_obj'] - aop['eps_p']:.2f}) and the halved output noise's 2 eps_out = {2 * aop['eps_out']:.2f} "
        f"gives about {aop['half-noise']['eps_worst'] + aop['eps_obj'] - aop['eps_p'] + 2 * aop['eps_out']:.1f} "
        f"< {args.epsilon:g}: AOP with half the noise is still ({args.epsilon:g}, delta)-DP under add/remove, so "
        "no audit can refute it. `wrong-sensitivity` "
        f"(sigma_obj / 4) is a real violation at the worst case (mu {aop['wrong-sensitivity']['mu_worst']:.2f}, "
        f"epsilon {aop['wrong-sensitivity']['eps_worst']:.2f}), but the canary's gradient is below 1 at the "
        f"minimiser: D's n records pull it to {aop['t']:.2f} u (the furthest n unit records get against Lambda), "
        f"where |grad l(theta; z_c)| = {aop['g_c']:.2f}, so mu = {aop['wrong-sensitivity']['mu_canary']:.2f} "
        f"(epsilon {aop['wrong-sensitivity']['eps_canary']:.2f}, below the claim even for an exact test; a "
        f"threshold test on {args.trials} trials certifies {lb('dp-gd', 'output')} for DP-GD's mu = "
        f"{dp_gd_mu:.2f}). `tenth-noise`: mu = "
        f"{aop['tenth-noise']['mu_canary']:.2f} (epsilon {aop['tenth-noise']['eps_canary']:.2f}), refuted. "
        f"The output level is weaker still: sigma_out = {aop['sigma_out']:.2f} against theta^'s spread "
        f"{aop['sd_theta']:.2f} and the canary's shift {aop['shift_theta']:.3f} (mu {aop['none']['mu_output']:.2f} "
        f"correct, {aop['tenth-noise']['mu_output']:.2f} tenth-noise). AOP's calibration formulas are also "
        "checked in tests/algorithms/test_aop.py.",
        f"* objpert (docs/algorithms.md §15; `objective-release` = theta^ = output - sigma_out xi_out, rebuilt and "
        f"checked against the tolerance {objp['gamma']:g}; claim eps_obj = {part('objpert', 'objective-release')}): "
        f"correct {lb('objpert', 'objective-release')}, half-noise {lb('objpert', 'objective-release', 'half-noise')}, "
        f"wrong-sensitivity {lb('objpert', 'objective-release', 'wrong-sensitivity')}, tenth-noise "
        f"{lb('objpert', 'objective-release', 'tenth-noise')}; `output` {lb('objpert', 'output')} / "
        f"{lb('objpert', 'output', 'half-noise')} / {lb('objpert', 'output', 'wrong-sensitivity')} / "
        f"{lb('objpert', 'output', 'tenth-noise')}. Unlike AOP the audit has power: the Lambda rule gives Lambda = "
        f"{objp['Lambda']:.2f} (sum form; eps0 = log(1 + beta/Lambda) = {objp['eps0']:.2f}) and sigma = "
        f"{objp['sigma']:.2f} (mu = L/sigma = {objp['mu_obj']:.2f}), so D's {args.n} rows pull theta^ only to "
        f"{objp['t']:.2f} u, where the canary's |l'| = {objp['g_c']:.3f} of L = 1: the canary's mu is "
        f"{objp['mu_canary']:.2f} (exact GDP epsilon {objp['eps_canary']:.2f} at delta, below the profile's "
        f"{part('objpert', 'objective-release')}: the profile's factor 2 for the unknown sign of l' and the "
        f"Jacobian term are not attained by a logistic canary). Half the noise gives mu {objp['mu_half']:.2f} "
        f"(epsilon {objp['eps_half']:.2f}), a real violation of the claim, refuted on both levels; the output "
        "noise is negligible (sigma_out = "
        f"{objp['sigma_out']:.1e}: Delta_out = (2n + 1) gamma/Lambda), so `output` sees theta^ almost as it is.",
        f"* Cubic Newton (T = 1, max_inner 20, ball diameter D = {cubic_d:g}): `inner-releases` correct "
        f"{lb('cubic-newton', 'inner-releases')}, half-noise {lb('cubic-newton', 'inner-releases', 'half-noise')}, "
        f"wrong-sensitivity {lb('cubic-newton', 'inner-releases', 'wrong-sensitivity')}, tenth-noise "
        f"{lb('cubic-newton', 'inner-releases', 'tenth-noise')}. The noise is calibrated to the model-gradient "
        f"sensitivity (L0 + L1 D)/n = {cubic['sens_n']:.4f}/n; the `opposed` canary moves every inner model "
        f"gradient by 1/(n+1), {100 * cubic['ratio']:.1f}% of it, so the N releases together have mu = "
        f"{cubic['none'][0]:.3f} (exact epsilon {cubic['none'][1]:.2f}; half-noise mu {cubic['half-noise'][0]:.2f}, "
        f"epsilon {cubic['half-noise'][1]:.2f}). At the default D = 10 the bound is {cubic_default['sens_n']:.2f}/n "
        f"and the canary reaches {100 * cubic_default['ratio']:.0f}% of it (half-noise mu "
        f"{cubic_default['half-noise'][0]:.2f}, epsilon {cubic_default['half-noise'][1]:.2f} < the claim: not "
        "refutable with this canary there, which is why an audit at D = 10 has no power); D enters "
        "only the sensitivity constant, the code path is the same. A single inner release (`gradient-release`, "
        "claim "
        f"{part('cubic-newton', 'gradient-release')}) holds 1/N of the budget and the `output` (a weighted "
        "average of the projected iterates) has almost no power.",
        "* Damped Newton's step size uses the exact Hessian and gradient and is not private by design "
        "(docs/algorithms.md §4.1), so only its released gradient is a meaningful audit target; its Hessian release "
        "(Frobenius sensitivity 1/(4n)) is covered by tests/algorithms/test_sensitivity.py.",
        "* Not audited: dp-gd-oracle (DP-GD with a non-private choice of T), minibatch-hess-add and "
        "minibatch-qu-clip (see above), multi-iteration transcripts of the Newton methods and of cubic Newton "
        "(T > 1), the direction release at its worst case (see the SOI canary), cubic Newton at its default "
        "diameter (see above), and the subsampled methods at a power that could test the RDP accountant's "
        "tightness (that needs many more trials or a white-box audit of the accountant, which "
        "tests/privacy/test_accountant.py covers against reference values).",
        "",
    ]
    gdp, gdp_ok = gdp_lines(rows, args)
    lines += gdp + greybox_lines()
    kept = DOC_PATH.read_text() if DOC_PATH.exists() else ""
    tail = kept[kept.index(KEPT_SECTION):] if KEPT_SECTION in kept else ""
    DOC_PATH.parent.mkdir(parents=True, exist_ok=True)
    DOC_PATH.write_text("\n".join(lines) + ("\n" + tail if tail else ""))
    return correct_ok and gdp_ok


def _fmt_mu(r: dict | None) -> str:
    if r is None or math.isnan(r["mu_lb"]):
        return "n/a"
    text = f"{r['mu_lb']:.2f}"
    return f"**{text}**" if r["mu_lb"] > r["mu_claimed"] else f"*{text}*" if r["mu_lb"] > r["mu_audited_part"] else text


def known_gaussian_answers(delta: float, trials: int, seeds: int = 5) -> list[tuple[float, float, float, float, float]]:
    """(mu, exact epsilon(delta), mean tail-counting bound, mean GDP epsilon bound, largest mu_lb) on the exact
    mu-GDP mechanism N(0, 1) vs N(mu, 1), ``trials`` per side, ``seeds`` repetitions, the same halves."""
    out = []
    for mu in (0.5, 1.0, 2.0):
        tail, gdp, mus = [], [], []
        for s in range(seeds):
            rng = np.random.default_rng([s, 11])
            neg, pos = rng.standard_normal(trials), mu + rng.standard_normal(trials)
            tail.append(threshold_audit(neg, pos, delta, rng=np.random.default_rng(s)).epsilon_lb)
            g = gdp_audit(neg, pos, delta, rng=np.random.default_rng(s))
            gdp.append(g.epsilon_lb)
            mus.append(g.mu_lb)
        out.append((mu, gaussian_epsilon_at_delta(mu, delta), float(np.mean(tail)), float(np.mean(gdp)), max(mus)))
    return out


def gdp_lines(rows: list[dict], args) -> tuple[list[str], bool]:
    """The section of the mu-GDP bound (dpnewton.audit.gdp), from the rows that carry one; True when every
    correct mechanism's mu lower bound is within its claims."""
    gauss = [r for r in rows if not math.isnan(r["mu_lb"])]
    if not gauss:
        return [], True
    by_key = {(r["mechanism"], r["level"], r["broken"]): r for r in gauss}
    pairs = list(dict.fromkeys((r["mechanism"], r["level"]) for r in gauss))
    broken_variants = BROKEN_VARIANTS[1:]
    correct = [by_key[(m, lv, "none")] for m, lv in pairs if (m, lv, "none") in by_key]
    ok = all(r["mu_lb"] <= r["mu_audited_part"] for r in correct)
    ratios = [r["epsilon_lb_gdp"] / r["epsilon_lb"] for r in correct if r["epsilon_lb"] >= 0.5]
    names = list(dict.fromkeys(m for m, _ in pairs))

    def refuted(name, broken, key):
        return any(r[key] for (m, _, b), r in by_key.items() if m == name and b == broken)

    counts = {b: (sum(refuted(m, b, "violates_claim") for m in names), sum(refuted(m, b, "violates_gdp_claim")
                                                                            for m in names)) for b in broken_variants}
    first = gauss[0]
    known = known_gaussian_answers(first["delta"], first["trials_per_side"])
    lines = [
        "## Gaussian-DP bound (the Gaussian mechanisms)",
        "",
        "`dpnewton.audit.gdp` [Dong, Roth, Su, *Gaussian Differential Privacy*, JRSS B 2022]: a mechanism is "
        "mu-GDP when every test has type II error beta >= Phi(Phi^-1(1 - alpha) - mu) at type I error alpha, so "
        "one test's rates give mu_lb = Phi^-1(1 - FPR_u) - Phi^-1(FNR_u), FPR_u and FNR_u one-sided "
        "Clopper-Pearson upper bounds at 2.5% each (jointly 95%). The threshold is pre-registered as for the "
        "tail-counting bound: the one with the best mu_lb on the selection half, counted once on the evaluation "
        "half (the same halves). Reported: mu_lb and eps LB (GDP) = epsilon(delta) of mu_lb-GDP, for the "
        "mechanisms with a zCDP plan, whose releases are Gaussian mechanisms composed adaptively: their "
        "claim is mu-GDP with mu = sqrt(2 rho) (of the audited part: sqrt(2 rho share)), converted to "
        "(epsilon, delta) by the exact GDP conversion the audit runs with. The bound refutes a Gaussian claim; "
        "for a trade-off curve that is not Gaussian (Poisson subsampling, objective perturbation) its epsilon is "
        "not a valid (epsilon, delta) lower bound and none is reported.",
        "",
        f"Known answer (tests/audit/test_gdp.py): the exact mu-GDP mechanism N(0, 1) against N(mu, 1), "
        f"{first['trials_per_side']} trials per side, mean of 5 seeds, delta = {first['delta']:.3g}:",
        "",
        "| mu | exact eps(delta) | eps LB tail counting | eps LB GDP | GDP / tail | largest mu_lb |",
        "|---|---|---|---|---|---|",
        *[f"| {mu:g} | {exact:.2f} | {tail:.2f} | {gdp:.2f} | {gdp / tail:.2f} | {top:.3f} |"
          for mu, exact, tail, gdp, top in known],
        "",
        "| mechanism | level | claimed mu (audited part) | claimed eps (audited part) | eps LB tail (correct) | "
        "mu LB (correct) | eps LB GDP (correct) | " + " | ".join(f"mu LB {b}" for b in broken_variants) + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(broken_variants),
    ]
    for m, lv in pairs:
        r = by_key.get((m, lv, "none"))
        if r is None:
            continue
        lines.append(f"| {m} | {lv} | {r['mu_audited_part']:.3f} | {r['epsilon_audited_part']:.2f} | "
                     f"{r['epsilon_lb']:.2f} | {_fmt_mu(r)} | {r['epsilon_lb_gdp']:.2f} | "
                     + " | ".join(_fmt_mu(by_key.get((m, lv, b))) for b in broken_variants) + " |")
    lines += [
        "",
        f"Bold: mu_lb above the whole run's mu = sqrt(2 rho) = {first['mu_claimed']:.3f}; italic: above the "
        "audited part's mu only.",
        "",
        "* Every correct Gaussian mechanism's mu_lb is within the claim of its audited part: "
        f"**{'yes' if ok else 'NO'}**.",
        f"* GDP against tail counting on the same trials: the GDP epsilon bound is {np.median(ratios):.2f}x the "
        f"tail-counting bound (median over the {len(ratios)} correct rows whose tail bound is at least 0.5; "
        f"range {min(ratios):.2f}-{max(ratios):.2f})." if ratios else "",
        "* Broken variants refuted (whole-run claim; of "
        f"{len(names)} Gaussian mechanisms), tail counting / GDP: "
        + ", ".join(f"`{b}` {counts[b][0]} / {counts[b][1]}" for b in broken_variants) + ".",
        "",
    ]
    return lines, ok


def greybox_lines() -> list[str]:
    """The grey-box section: method, and per card and relation what the same-seed coupled replay saw."""
    lines = [
        "## Grey-box sensitivity test (record and replay)",
        "",
        "`dpnewton.audit.greybox`, tests/audit/test_greybox.py (default test suite, about 4 s). Every optimizer "
        "draws the noise of each release through `PrivacyLedger.draw_noise(quantity, value, sigma, rng, "
        "sensitivity=None)`: the value it releases (gradient, count, trace, direction, curvature triangle, "
        "Hessian, batch sum, the objective's linear term, output), its noise scale and, when it is not charged "
        "to the ledger, its sensitivity. In production the method is the draw `sigma * "
        "rng.standard_normal(shape)` the algorithms made before, bit for bit (the determinism and known-answer "
        "tests pass unchanged); `RecordingLedger` overrides it.",
        "",
        "* Neighbours: `add-remove` (the library's relation, n private): D' = D + the canary row, each side "
        "releasing its own noisy count first; `add-remove-public-n` (the benchmark's, n public): the canary row "
        "replaced by a zero row, which adds nothing to any gradient, SOI or batch sum (zero-out neighbours: the "
        "canary's removal with the public n kept; with each side's own n the scales differ by construction, "
        "the relation's stated caveat, and a row cannot leave the unit ball: `LogisticProblem` refuses it, so "
        "a missing clip cannot reach a mechanism). Rows: 24 x -u and 6 random rows of norm <= 1; canary +u; "
        "d = 3, epsilon 1, delta 1e-5, T = 3, start pinned at -0.6 u + 0.8 e_2 (the canary's gradient is "
        "0.65 of the gradient sensitivity there).",
        "* Coupling: D' runs with D's seed and every release returns D's released value (the coupled noise is "
        "D's released value minus D''s input; the generator still draws, so the stream stays aligned). Each "
        "release is a Gaussian mechanism given the released history (adaptive composition), so the check is "
        "per release at the same history: D' then sees D's gradients, count, traces and curvature, hence "
        "D's iterates, lambdas and adaptive sensitivities (double-noise Newton's ||g~||/(4 n lambda^2 -/+ "
        "lambda)). Without the coupling that sensitivity differs between the sides (tested).",
        "* Checks: (i) the same releases in the same order (quantity, step), the same ledger charges and the same "
        "scales through `noise`; (ii) equal noise scales, sensitivities and rho (relative 1e-9); (iii) each "
        "release's input moved by at most the sensitivity its noise covers (L2 of the flattened input; declared "
        "sensitivity x the variant's noise factor). Objective perturbation: the noise b is released on a zero "
        "input and the data enter through the minimiser, so its objective release is checked by its coupling: "
        "at D's minimiser t the noise that makes t stationary for D' moves by sum_{D'} grad l(t) - sum_D "
        "grad l(t) (sum form), against the objective noise's sensitivity in sum form; its output release "
        "(sensitivity given the released minimiser, which the same-seed replay does not reproduce) is checked "
        "by (i) and (ii) only.",
        "* Broken variants: the black-box audit's noise factors (`half-noise`, `wrong-sensitivity`, "
        "`tenth-noise`: the noise then covers that fraction of the declared sensitivity) and, under "
        "`add-remove`, `public-n` (no count release; every scale from each side's exact n, the paper's "
        "convention).",
        "* Softmax (`dpnewton.audit.greybox_softmax`, the fit for K > 2 classes, both methods, K = 3, p = 3, "
        "T = 5; add-remove, the canary added and removed): its count, Gram triangle (`bohning`) and gradient "
        "sums are drawn through the same ledger hook, and checks (i)-(iii) run unchanged, plus (iv): the output "
        "is post-processing of the releases, so W is the same on both sides (relative 1e-9). Rows: 24 x -u of "
        "class 0, 6 random rows; canary 3u of class 0 (only the projection onto the unit ball keeps it within "
        "the sensitivities), whose class the model turns away from, so its gradient nears the bound sqrt(2). "
        "Also caught (tests/audit/test_greybox.py): the gradient noise calibrated to 1 (the binary bound) or "
        "sqrt(2/K) (one class's noise for the K x p release; at the uniform first step the canary's change "
        "equals it: caught at later steps only), the row projection left out, and DP-GD's means over the exact "
        "n (iv); in the Böhning step the count cancels, so that variant releases nothing more.",
        "* Private feature ranges (`dpnewton.audit.greybox_preprocessing`, `preprocessing.release_ranges` as "
        "`PrivateFeatureScaler` runs it, the Gaussian release and the pure Laplace one, whose move is measured "
        "in L1; add-remove, an outlier (1e5, 0, 0) added and removed, 40 rows, d = 3): (i)-(iii) and (iv), the "
        "ranges being post-processing of the released histograms. Any row moves one count of each of the d "
        "histograms, so the ratio is exactly 1; `wrong-sensitivity` touches gradient releases only (blank: it "
        "is the correct release here). Also caught (tests/audit/test_greybox.py): a sensitivity of 1 (one "
        "histogram, not d) and feature 0's upper end read off the data (iv).",
        "",
        "| relation | card | configuration | releases checked | largest input move / sensitivity, by release "
        "| correct | " + " | ".join(b for b in GREYBOX_VARIANTS[1:]) + " |",
        "|---|---|---|---|---|---|" + "---|" * (len(GREYBOX_VARIANTS) - 1),
    ]
    half_missed = {}

    def row(rel, name, config, audit):
        """One table line; ``audit(broken)`` is the report of a variant (None: not applicable)."""
        ok = audit("none")
        cells = []
        for b in GREYBOX_VARIANTS[1:]:
            rep = audit(b)
            cells.append("" if rep is None else "caught " + rep.violations[0].split()[0] if rep.violations
                         else "not caught")
            if b == "half-noise" and rep is not None and not rep.violations and ok.largest_ratio > 0:
                half_missed[name] = max(half_missed.get(name, 0.0), ok.largest_ratio)
        moves = ", ".join(f"{q} {v:.2f}" for q, v in ok.ratios.items()) or "none"
        lines.append(f"| {rel} | {name} | {config} | {ok.releases} | {moves} | "
                     f"{'pass' if ok.passed else 'FAIL: ' + ok.violations[0]} | " + " | ".join(cells) + " |")

    for rel in (LIBRARY_RELATION, BENCHMARK_RELATION):
        for name, hyper in greybox_cases(rel):
            config = ", ".join(f"{k}={v}" for k, v in hyper.items()) or "default"
            row(rel, name, config, lambda b: None if b == "public-n" and rel != LIBRARY_RELATION
                else greybox_audit(name, rel, hyper, b))
    for method in SOFTMAX_METHODS:
        for removal in (False, True):
            row(LIBRARY_RELATION, f"softmax-{method}", "canary removed" if removal else "canary added",
                lambda b: None if b == "public-n" else softmax_greybox_audit(method, b, removal=removal))
    for law in RANGE_LAWS:
        for removal in (False, True):
            row(LIBRARY_RELATION, f"feature-ranges ({law})", "outlier removed" if removal else "outlier added",
                lambda b: None if b in ("public-n", "wrong-sensitivity")
                else ranges_greybox_audit(law, b, removal=removal))
    lines += [
        "",
        "Reading: a ratio is the largest ||input on D - input on D'|| / sensitivity over the run's releases of "
        "that quantity; near 1 the canary attains the bound (the count: exactly 1; precond-dp-gd's curvature: "
        "u u^T/(4N)). `caught (ii)` = a noise scale or sensitivity differs between the sides, `caught (iii)` = "
        "an input moved by more than the sensitivity its noise covers. `half-noise` is not caught where no "
        "input moves by more than half its bound: "
        + ", ".join(f"{name} (largest ratio {r:.2f})" for name, r in half_missed.items())
        + " (cubic Newton's model-gradient bound (L0 + L1 D)/n at the default D = 10 is loose for this canary; "
        "AOP's objective noise covers the replace-one bound 2L, twice any add/remove change). With Poisson "
        "sampling (q = 0.1 by default) the canary may "
        "be in no batch of this seed (ratio 0: nothing to check); at batch_frac = 1 every batch holds it. The "
        "non-private steps (dp-gd-oracle's line search, damped Newton's step size) are not releases: the "
        "replay does not see them.",
        "",
    ]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--epsilon", type=float, default=3.0)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--d", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=None, help="audit only these mechanisms (rows of the others are "
                                                          "kept from the existing CSV)")
    ap.add_argument("--doc-only", type=float, default=None, metavar="SECONDS",
                    help="rewrite the doc from the existing CSV (SECONDS = the time of the audit to state: of the "
                         "mechanisms of --only when given, else of all)")
    args = ap.parse_args(argv)
    if args.doc_only is not None:
        ok = write_doc(_read_csv(CSV_PATH), args, args.doc_only, args.only)
        print(f"wrote {DOC_PATH}")
        return 0 if ok else 1
    rows, timings = [], {}
    for mech in default_mechanisms():
        if args.only is not None and mech.name not in args.only:
            continue
        for broken in BROKEN_VARIANTS:
            t0 = time.perf_counter()
            rows += [r.as_dict() for r in audit_mechanism(mech, args.trials, args.epsilon, args.n, args.d, broken,
                                                          seed=args.seed)]
            timings[(mech.name, broken)] = time.perf_counter() - t0
            print(f"{mech.name:20s} {broken:18s} {timings[(mech.name, broken)]:6.1f} s  "
                  + "  ".join(f"{r['level']}={r['epsilon_lb']:.3f}" for r in rows[-len(mech.levels):]), flush=True)
    if args.only is not None and CSV_PATH.exists():
        done = {r["mechanism"] for r in rows}
        rows = _in_registry_order([r for r in _read_csv(CSV_PATH) if r["mechanism"] not in done] + rows)
    CSV_PATH.parent.mkdir(parents=True, exist_ok=True)
    fields = list(rows[-1])
    with open(CSV_PATH, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in fields})
    ok = write_doc(_read_csv(CSV_PATH), args, sum(timings.values()), args.only)
    print(f"wrote {CSV_PATH} and {DOC_PATH}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
