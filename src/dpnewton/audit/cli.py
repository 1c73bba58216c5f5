"""``dpnewton audit ALGORITHM``: empirical privacy audit of one optimizer (see :mod:`dpnewton.audit`)."""

from __future__ import annotations

import argparse
import math

from ..io import to_json
from . import audit_mechanism, default_mechanisms, find_mechanism
from .variants import BROKEN_VARIANTS


def _cmd_audit(args) -> int:
    if args.trials < 20:
        raise ValueError(f"--trials={args.trials} must be >= 20")
    if not args.epsilon > 0:
        raise ValueError(f"--epsilon={args.epsilon} must be > 0")
    if args.broken not in BROKEN_VARIANTS:
        raise ValueError(f"--broken={args.broken!r} must be one of {', '.join(BROKEN_VARIANTS)}")
    mech = find_mechanism(args.algorithm)
    rows = audit_mechanism(mech, trials=args.trials, epsilon=args.epsilon, n=args.n, d=args.d,
                           broken=args.broken, seed=args.seed)
    if args.json:
        print(to_json([r.as_dict() for r in rows]))
        return 0
    for r in rows:
        flag = "EXCEEDS CLAIM" if r.violates_claim else "ok"
        print(f"{r.mechanism} [{r.level}] broken={r.broken}: epsilon_lb={r.epsilon_lb:.3f} "
              f"(claimed {r.epsilon:g} at delta={r.delta:.3g}; audited part {r.epsilon_audited_part:.3f}) "
              f"trials/side={r.trials_per_side} FP={r.false_pos}/{r.n_eval} FN={r.false_neg}/{r.n_eval} {flag}")
        if not math.isnan(r.mu_lb):   # a Gaussian mechanism: the mu-GDP bound (dpnewton.audit.gdp)
            gdp_flag = "EXCEEDS CLAIM" if r.violates_gdp_claim else "ok"
            print(f"    mu_lb={r.mu_lb:.3f} (claimed mu {r.mu_claimed:.3f}; audited part {r.mu_audited_part:.3f}) "
                  f"epsilon_lb_gdp={r.epsilon_lb_gdp:.3f} {gdp_flag}")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    names = [m.name for m in default_mechanisms()]
    p = subparsers.add_parser("audit", help="empirical lower bound on epsilon for one optimizer",
                              description="Run ALGORITHM on a canary pair (D, D + one record) many times "
                                          "per side and report a 95%% Clopper-Pearson lower bound on epsilon "
                                          "(Gaussian mechanisms: also a 95%% mu-GDP lower bound).")
    p.add_argument("algorithm", metavar="MECHANISM", help="audited mechanism (an algorithm or a variant of one): "
                   + ", ".join(names))
    p.add_argument("--trials", type=int, default=10_000, help="trials per side (default 10000)")
    p.add_argument("--epsilon", type=float, default=3.0, help="claimed epsilon (default 3)")
    p.add_argument("--broken", default="none", choices=BROKEN_VARIANTS,
                   help="inject a broken noise calibration: every noise scale x1/2 (half-noise) or x1/10 "
                        "(tenth-noise), or the gradient's x1/4 (wrong-sensitivity); default none")
    p.add_argument("--n", type=int, default=50, help="records in D (default 50; delta = 1/n^2)")
    p.add_argument("--d", type=int, default=2, help="dimension (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=_cmd_audit)
    return p
