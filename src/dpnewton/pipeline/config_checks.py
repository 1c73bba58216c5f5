"""The checks of a loaded config that make every value a job reads fail at load time, not inside a job.

:func:`check_job_values` (called by :func:`dpnewton.pipeline.config.check_config`, so before any job
runs) meets, for every job of the config's plan, the checks its job would meet first:

* ``algorithms.<name>.hyper``: the algorithm's configuration class built from its card, as the CLI
  and the job build it (:func:`dpnewton.algorithms.registry.build_config`): misspelled names, values
  out of range, values of the wrong type; a non-iterative card (``iterative=False``, e.g. aop) takes
  the T grid ``[1]`` only;
* ``seeds``: stored as 64-bit integers in the run rows; every T of a grid and every cap a config
  states: at most the runs' public cap :data:`dpnewton.experiment.MAX_ITERATIONS`;
* ``datasets.<name>.options``: names and types (:func:`dpnewton.data.prepare.check_options`);
* ``holdout``: both splits non-empty, for every dataset whose row count is known without its data
  (:func:`known_rows`);
* ``claims``: the algorithms its roles name are registered (with the report on);
* every (epsilon, conversion) a run, the timing stage or a track uses, at ``delta`` or, with
  ``delta: null``, at n^-2 of each dataset whose row count is known: the conversion gives a budget rho,
  the rows' CKS epsilon of that rho evaluates (``dpnewton.experiment.result_record``), and a given
  delta is below 1/n (:func:`dpnewton.privacy.neighbouring.check_delta_for_rows`).

Each error is one line naming the config key, the value and the fix. A dataset whose row count is known
only from its data (``custom``) gets its n-dependent checks in its jobs.
"""

from __future__ import annotations

import json

from ..algorithms.registry import build_config
from ..data import DatasetError
from ..data.prepare import check_options
from ..data.registry import get_spec
from ..experiment import MAX_ITERATIONS
from ..holdout import holdout_fraction, holdout_split
from ..privacy.conversions import MAX_EPSILON, epsilon_to_rho, rho_to_epsilon
from ..privacy.neighbouring import BENCHMARK_RELATION, check_delta_for_rows, resolve_delta
from .plan import eps_label, expand, job_members, seed_list, studies

#: the largest seed: the run rows store seeds as 64-bit integers
INT64_MAX = 2**63 - 1


def check_job_values(cfg: dict, registry) -> None:
    """Every value of a filled config that a job reads, checked now (module docstring); ValueError."""
    plan = expand(cfg, check_data=False, registry=registry)
    for seed in seed_list(cfg["seeds"]):
        if seed > INT64_MAX:
            raise ValueError(f"config key seeds: {seed} is above 2**63 - 1, the largest seed the run rows store; "
                             "use smaller seeds")
    for name, algo in plan.algorithms.items():
        check_hyper(name, algo, registry, (cfg.get("algorithms") or {}).get(name))
    rows = {}
    for name, entry in plan.datasets.items():
        try:
            check_options(name, entry["options"])
        except DatasetError as exc:
            raise ValueError(f"config key datasets.{name}.options: {exc}; correct or remove it") from None
        rows[name] = training_rows(name, entry["options"], plan.holdout)
    for dataset, conversion, epsilon, key in budget_cells(cfg, plan):
        check_budget(epsilon, cfg["delta"], conversion, dataset, rows.get(dataset), key)
    check_tracks(cfg, plan)
    check_claims_roles(cfg, registry)


def check_claims_roles(cfg: dict, registry) -> None:
    """With the claims report on, the algorithms its roles name (``claims.baseline``, ``oracle``,
    ``damped``, ``table1_ours``, ``ours``) are registered: a misspelled one would leave its verdicts
    without data instead of failing."""
    claims = cfg["claims"]
    if not claims["enabled"]:
        return
    for role in ("baseline", "oracle", "damped", "table1_ours", "ours"):
        names = claims[role] if isinstance(claims[role], list) else [claims[role]]
        unknown = [name for name in names if name not in registry]
        if unknown:
            raise ValueError(f"config key claims.{role}: {unknown} are not registered algorithms (registered: "
                             f"{', '.join(sorted(registry))}); correct the name")


def check_tracks(cfg: dict, plan) -> None:
    """``tracks``: every variant names a configuration (:func:`dpnewton.pipeline.tracks.expand_tracks`), a
    private selection's method can be a candidate (:func:`dpnewton.tuning.check_method`) and its law of K
    is one :func:`dpnewton.privacy.selection.make_distribution` builds."""
    from ..privacy.selection import make_distribution
    from ..tuning import check_method
    from .tracks import expand_tracks     # imported on use: the run modules load pandas

    for _, spec in expand_tracks(cfg, plan):
        if spec["track"] != "private-selection":
            continue
        try:
            check_method(spec["base_algorithm"])
        except ValueError as exc:
            raise ValueError(f"config key tracks.selection.methods.{spec['method']}: {exc}; choose variants of "
                             "another algorithm") from None
        law = dict(spec["distribution"])
        try:
            make_distribution(law.pop("name"), **law)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"config key tracks.selection.distribution: {spec['distribution']} is not a law of K "
                             f"({type(exc).__name__}: {exc}); give the parameters its name needs (poisson: mean "
                             "or mu; tnb: eta with mean or gamma; geometric, logarithmic: mean or gamma)") from None


def check_hyper(name: str, algo: dict, registry, entry: dict | None = None) -> None:
    """``algorithms.<name>`` (``algo``: its plan entry; ``entry``: its config entry): its hyper-parameters
    build the card's configuration class; its T grid and the caps it states are within the runs' cap (a
    grid extension's default cap is not stated: the extension stops at the runs' cap,
    :func:`dpnewton.pipeline.t_search.next_extension`); a non-iterative card runs T = 1 only."""
    entry = entry or {}
    card = registry[algo["base"]]
    Ts = [*algo["iterations"], entry.get("max_iterations") or 0, *algo["max_iterations_by_epsilon"].values()]
    if max(Ts) > MAX_ITERATIONS:
        raise ValueError(f"config key algorithms.{name}: T = {max(Ts):,} is above the cap of {MAX_ITERATIONS:,} "
                         "updates of every run (dpnewton.experiment.MAX_ITERATIONS), which its job would refuse; "
                         "use a smaller T grid or cap")
    if not card.iterative and algo["iterations"] != [1]:
        raise ValueError(f"config key algorithms.{name}: {algo['base']} is not iterative (its runs ignore T), so its "
                         f"T grid {algo['iterations']} must be [1]; set iterations: [1]")
    if card.config is None:
        if algo["hyper"]:
            raise ValueError(f"config key algorithms.{name}.hyper: {algo['base']} takes no hyper-parameters, got "
                             f"{sorted(algo['hyper'])}; remove them")
        return
    cls, fixed = card.config
    try:
        build_config(cls, dict(algo["hyper"]), fixed)
    except (TypeError, ValueError) as exc:
        problem = f"a value of the wrong type: {exc}" if isinstance(exc, TypeError) else str(exc)
        raise ValueError(f"config key algorithms.{name}.hyper: {json.dumps(algo['hyper'], default=str)} is not a "
                         f"configuration of {algo['base']} ({problem}); correct it (docs/algorithms.md lists the "
                         "hyper-parameters)") from None


def known_rows(name: str, options: dict) -> int | None:
    """A dataset's row count without its data: a recipe's ``n`` option, else the documented shape of a
    registered dataset (its default options); None when only the data knows (``custom``)."""
    spec = get_spec(name)
    if "n" in spec.options:
        return int(options.get("n", spec.options["n"]))
    return spec.shape[0]


def training_rows(name: str, options: dict, holdout: float | None) -> int | None:
    """The rows the runs see (the training split with a holdout, whose both splits must be non-empty)."""
    n = known_rows(name, options)
    if n is None or holdout_fraction(holdout) is None:
        return n
    try:
        return len(holdout_split(name, holdout, n)[0])
    except ValueError as exc:
        raise ValueError(f"config key holdout: {exc}; use a fraction that leaves rows in both splits") from None


def budget_cells(cfg: dict, plan) -> list[tuple[str, str, float, str]]:
    """(dataset, conversion, epsilon, config key) of every budget a run, the timing stage or a fixed-rule
    track converts, once each."""
    primary, study_keys = cfg["conversion"], {eps_label(e) for s in studies(cfg) for e in s["epsilons"] or []}
    cells = {}
    for job in plan.jobs:
        for m in job_members(job.spec).values():
            key = "epsilons" if m["eps_label"] not in study_keys or m["conversion"] == primary else "conversion_study"
            cells.setdefault((job.dataset, m["conversion"], float(m["epsilon"])), key)
    for ds in plan.datasets:
        cells.setdefault((ds, primary, float(cfg["timing"]["epsilon"])), "timing.epsilon")
    tracks = cfg.get("tracks") or {}     # optional: no tracks
    for e in tracks.get("epsilons") or []:
        for ds in tracks.get("datasets") or list(plan.datasets):
            if ds in plan.datasets:
                cells.setdefault((ds, primary, float(e)), "tracks.epsilons")
    return [(ds, conv, eps, key) for (ds, conv, eps), key in cells.items()]


def check_budget(epsilon: float, delta: float | None, conversion: str, dataset: str, n: int | None, key: str) -> None:
    """The budget of a run at ``epsilon`` on ``dataset`` (``n`` training rows, None: unknown) converts:
    rho from (epsilon, delta) by ``conversion`` and the CKS epsilon of that rho that every row records."""
    if n is not None and delta is not None:
        try:
            check_delta_for_rows(delta, n, BENCHMARK_RELATION)
        except ValueError as exc:
            raise ValueError(f"config key delta: on dataset {dataset}, {exc}") from None
    if epsilon > MAX_EPSILON:
        raise ValueError(f"config key {key}: epsilon {epsilon:g} is above {MAX_EPSILON:g}, the largest epsilon the "
                         "package's mechanisms calibrate (no privacy is left there); use a smaller epsilon (the "
                         "paper's grid ends at 10)")
    if delta is None and n is None:
        return
    d = resolve_delta(delta, BENCHMARK_RELATION, n) if n is not None else delta
    where = f"delta={'n^-2 = ' if delta is None else ''}{d:.3g} on {dataset}, conversion {conversion}"
    try:
        rho = epsilon_to_rho(epsilon, d, conversion)
    except (ValueError, ArithmeticError) as exc:
        raise ValueError(f"config key {key}: epsilon {epsilon:g} has no budget rho at {where}: {exc}") from None
    try:
        rho_to_epsilon(rho, d, "cks")
    except (ValueError, ArithmeticError) as exc:
        raise ValueError(f"config key {key}: epsilon {epsilon:g} is too large to account at {where}: its rho = "
                         f"{rho:.3g} has no CKS epsilon, which the runs record as epsilon_spent_cks "
                         f"({type(exc).__name__}: {exc}); use a smaller epsilon (the paper's grid ends at 10)"
                         ) from None
