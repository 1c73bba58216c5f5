"""Experiment config -> the list of optimizer jobs, plus stable hashes and labels.

A *job* is one (dataset, algorithm, conversion, epsilon, seed chunk); it runs every seed of its
chunk times every T of the algorithm's grid (see ``docs/pipeline.md`` for why), and releases the
models of every configuration that shares its trajectory (:func:`share_trajectories`). The jobs of a
``lockstep`` algorithm (its card) on one dataset and seed chunk are one job instead, whatever their
configuration, conversion and epsilon (:func:`group_jobs`): its runs step together in one batch. With
``job_grouping: algorithm`` every algorithm's jobs are grouped so (fewer, longer jobs: less start-up
per run), those of a card that is not ``lockstep`` running one trajectory after another. A group longer
than ``job_split`` allows for the workflow's cores is split by epsilon, then by trajectory (:mod:`.job_split`).
Everything that determines a job's rows is collected in :attr:`Job.spec` (a serialised :class:`~.jobspec.JobSpec`,
checked by the job); its hash is the ``config_hash``
column of every row, so changing one algorithm's grid does not change the hash (or rerun) other jobs.
A ``holdout`` enters the specs (and the protocol) only when it is on, so the jobs of a config
without one keep their hashes.
Likewise ``precision`` enters the specs only when it is not float64.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..algorithms import ALGORITHMS
from ..data import DatasetError
from ..data.loaders import Context
from ..data.registry import get_spec
from ..holdout import holdout_fraction
from ..privacy import CONVERSIONS
from .job_split import DEFAULT as DEFAULT_SPLIT
from .job_split import setting_of, split_groups
from .jobspec import job_description, job_members, trajectories  # noqa: F401 (the plan's API)
from .labels import config_hash, eps_label, seed_chunks, seed_list  # noqa: F401 (the plan's API)
from .schema import SCHEMA_PATH, fill_defaults

#: the conversions' names (the registry's order), the default of ``conversion_study.conversions``
ALL_CONVERSIONS = list(CONVERSIONS)
#: defaults of a ``conversion_study`` entry: applied by :func:`studies` to copies, not written into the
#: config (a schema default inside the study's oneOf would change the config hash of every config
#: that has a study)
STUDY_DEFAULTS = {"enabled": True, "algorithm": "hess-clip", "algorithms": None, "conversions": ALL_CONVERSIONS,
                  "datasets": None, "epsilons": None}


def resolve_data_dir(data_dir: str | None, base_dir: str | Path) -> Path | None:
    """A relative data_dir is relative to the repository (the folder of the Snakefile)."""
    if data_dir in (None, ""):
        return None
    p = Path(data_dir).expanduser()
    return p if p.is_absolute() else (Path(base_dir) / p).resolve()


def dataset_available(name: str, data_dir: Path | None, allow_download: bool,
                      options: dict | None = None) -> tuple[bool, str]:
    """Can ``prepare(name, ...)`` find its source files without downloading? (ok, reason)."""
    spec = get_spec(name)
    if not spec.sources or allow_download:
        return True, ""
    if data_dir is not None and not data_dir.is_dir():
        return False, f"data_dir {data_dir} does not exist"
    opts = dict(spec.options)
    opts.update({k: v for k, v in (options or {}).items() if k in opts})
    ctx = Context(data_dir, Path("resources/data"), verify=False, allow_download=False)
    try:
        spec.resolve(spec, ctx, opts)
    except DatasetError as exc:
        return False, str(exc).splitlines()[0]
    return True, ""


@dataclass(frozen=True)
class Job:
    dataset: str
    algorithm: str
    conversion: str
    eps: str                      # path label of epsilon
    chunk: str                    # path label of the seed chunk
    spec: dict = field(hash=False, compare=False)  # serialised :class:`~.jobspec.JobSpec` (its config hash)

    @property
    def stem(self) -> str:
        return f"results/runs/{self.dataset}/{self.algorithm}/{self.conversion}/eps~{self.eps}/seeds~{self.chunk}"

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.dataset, self.algorithm, self.conversion, self.eps, self.chunk)


@dataclass
class Plan:
    """The expanded experiment: jobs, kept/dropped datasets, algorithm grids, warnings."""

    config: dict
    datasets: dict[str, dict]
    dropped: dict[str, str]
    algorithms: dict[str, dict]
    skipped_algorithms: list[str]
    jobs: list[Job]
    curve_epsilons: list[str]
    warnings: list[str]
    holdout: float | None = None     # test fraction of every dataset (:mod:`dpnewton.holdout`); None = off
    precision: str = "float64"       # of the products with Z (:data:`dpnewton.loss.PRECISIONS`)
    given: dict | None = None        # the config as passed to :func:`expand` (its hash is the protocol's)

    @property
    def job_index(self) -> dict[tuple, Job]:
        return {j.key: j for j in self.jobs}

    def conversions(self) -> list[str]:
        return sorted({j.conversion for j in self.jobs})

    def base(self, name: str) -> str:
        """Registered algorithm run by the configuration ``name``."""
        return self.algorithms[name]["base"]


def algorithm_grids(cfg: dict, registry) -> tuple[dict[str, dict], list[str]]:
    """name -> {'base', 'iterations', 'hyper', 'epsilons', 'max_iterations', 'max_iterations_by_epsilon'}.

    An entry's key is its *configuration name* (paths, tables, figures); ``algorithm:`` names the
    registered algorithm it runs (default: the key itself), so several entries can run one algorithm
    with different ``hyper`` (tuning variants). ``epsilons`` restricts the entry to some epsilons;
    ``max_iterations`` is the cap of the automatic grid extension (``tuning``);
    ``max_iterations_by_epsilon`` ({epsilon: cap}) overrides it at some epsilons, so that the cells
    whose best T needs a long run (e.g. DP-GD at epsilon = 10) get a high cap without rerunning the
    others. Unknown bases error or are skipped (``missing_algorithms``).
    """
    out, skipped = {}, []
    grids = cfg.get("grids") or {}           # no schema default: a grid is needed only by `grid:` entries
    tuning = cfg["tuning"]
    for name, entry in cfg["algorithms"].items():
        base = entry.get("algorithm", name)     # the entry's own name unless it names another algorithm
        if base not in registry:
            if cfg["missing_algorithms"] == "skip":
                skipped.append(name)
                continue
            what = repr(name) if base == name else f"{name!r} (algorithm {base!r})"
            raise ValueError(f"config algorithms: {what} is not a registered algorithm "
                             f"(registered: {', '.join(sorted(registry))}); set missing_algorithms: skip "
                             f"to drop unregistered ones")
        if "iterations" in entry:
            Ts = entry["iterations"]
        elif "grid" in entry:
            if entry["grid"] not in grids:
                raise ValueError(f"config algorithms.{name}.grid: {entry['grid']!r} is not a key of grids "
                                 f"({', '.join(grids)})")
            Ts = grids[entry["grid"]]
        else:
            raise ValueError(f"config algorithms.{name}: give either 'grid' or 'iterations'")
        Ts = sorted({int(t) for t in Ts})
        if not Ts or Ts[0] < 1:
            raise ValueError(f"config algorithms.{name}: the T grid {Ts} must be non-empty integers >= 1")
        cap = entry.get("max_iterations")       # optional; None = the tuning default below
        if cap is None and tuning["extend_grid"] and len(Ts) > 1:
            cap = Ts[-1] * int(tuning["factor"]) ** int(tuning["max_extensions"])
        if cap is not None and int(cap) < Ts[-1]:
            raise ValueError(f"config algorithms.{name}.max_iterations={cap} is below the grid maximum {Ts[-1]}")
        eps = entry.get("epsilons")
        labels = None if eps is None else [eps_label(e) for e in eps]
        out[name] = {"base": base, "iterations": Ts, "hyper": dict(entry["hyper"]),
                     "epsilons": labels,
                     "max_iterations": None if cap is None or len(Ts) < 2 else int(cap),
                     "max_iterations_by_epsilon": _caps_by_epsilon(cfg, name, entry, Ts, labels)}
    return out, skipped


def _caps_by_epsilon(cfg: dict, name: str, entry: dict, Ts: list[int], labels: list[str] | None) -> dict[str, int]:
    """``algorithms.<name>.max_iterations_by_epsilon`` as {epsilon label: cap}, checked."""
    raw = entry.get("max_iterations_by_epsilon") or {}
    if raw and len(Ts) < 2:
        raise ValueError(f"config algorithms.{name}.max_iterations_by_epsilon: a one-point T grid {Ts} "
                         f"is never extended; remove it")
    run_at = set(labels) if labels is not None else {eps_label(e) for e in cfg["epsilons"]}
    for study in studies(cfg):
        run_at |= {eps_label(e) for e in study["epsilons"] or []}
    out = {}
    for key, cap in raw.items():
        try:
            label = eps_label(float(key))
        except ValueError:
            raise ValueError(f"config algorithms.{name}.max_iterations_by_epsilon: key {key!r} is not an "
                             f"epsilon") from None
        if label not in run_at:
            raise ValueError(f"config algorithms.{name}.max_iterations_by_epsilon: epsilon {key} is not one "
                             f"this entry runs at ({', '.join(sorted(run_at, key=float))})")
        if int(cap) < Ts[-1]:
            raise ValueError(f"config algorithms.{name}.max_iterations_by_epsilon[{key}]={cap} is below the "
                             f"grid maximum {Ts[-1]}")
        out[label] = int(cap)
    return out


def studies(cfg: dict) -> list[dict]:
    """``conversion_study`` as a list of the enabled study entries (it may be one mapping or a list),
    each a copy with :data:`STUDY_DEFAULTS` filled in."""
    raw = cfg.get("conversion_study") or []     # optional: no study
    entries = [{**STUDY_DEFAULTS, **e} for e in ([raw] if isinstance(raw, dict) else list(raw))]
    return [e for e in entries if e["enabled"]]


def extension_spec(cfg: dict, algo: dict, eps: str, max_passes: int | None = None) -> dict | None:
    """Grid-extension rule of one algorithm's jobs at epsilon label ``eps`` (None: no extension);
    ``max_passes``: the dataset's cap in pass-equivalents per run (absent from the rule without one, so
    that the job specs and their hashes of datasets without a cap do not change)."""
    tuning = cfg["tuning"]
    cap = algo["max_iterations_by_epsilon"].get(eps, algo["max_iterations"])
    if not tuning["extend_grid"] or cap is None:
        return None
    rule = {"factor": int(tuning["factor"]), "max_iterations": cap}
    if tuning["probe_first_seed"]:
        rule["probe_first_seed"] = True
    return rule if max_passes is None else {**rule, "max_passes": int(max_passes)}


def curve_epsilons(cfg: dict) -> list[str]:
    """Epsilons whose per-iterate curves are stored: those Figures 1 and 3 plot."""
    fig = cfg["figures"]
    eps = [fig["runtime_epsilon"]] + list(fig["convergence_epsilons"])
    return sorted({eps_label(e) for e in eps if e is not None}, key=float)


def expand(cfg: dict, base_dir: str | Path = ".", registry=None, check_data: bool = True,
           slots: int | None = None) -> Plan:
    """Expand a validated config into the job list (see module docstring); ``slots``: the job slots the
    jobs are sized for under ``job_split: auto`` (the workflow's --cores, or a cluster's --jobs; None: no split).

    ``cfg`` is normally :func:`dpnewton.pipeline.config.load_config`'s; a config that was not loaded
    gets the schema defaults in a copy (``Plan.config``), while the protocol's config hash is over
    ``cfg`` as passed.
    """
    if registry is None:
        registry = ALGORITHMS
    # (without the checkout's schema, e.g. a non-editable install, the config must come from load_config)
    given, cfg = cfg, copy.deepcopy(cfg)
    if SCHEMA_PATH.exists():
        fill_defaults(cfg)
    warnings: list[str] = []
    holdout = holdout_fraction(cfg.get("holdout"))   # no schema default on purpose (absent = off)
    precision = cfg.get("precision", "float64")      # no schema default on purpose (absent = float64)
    grouping = cfg.get("job_grouping", "cell")       # no schema default on purpose (absent = cell)
    data_dir = resolve_data_dir(cfg["data_dir"], base_dir)
    datasets, dropped = {}, {}
    for name, entry in cfg["datasets"].items():
        options = dict(entry["options"])
        ok, why = (dataset_available(name, data_dir, cfg["allow_download"], options)
                   if check_data else (True, ""))
        if ok:
            datasets[name] = {"options": options, "optional": bool(entry["optional"]),
                              "max_passes": entry.get("max_passes")}     # absent = no cap
        elif entry["optional"]:
            dropped[name] = why
            warnings.append(f"optional dataset {name!r} dropped: {why}")
        else:
            raise ValueError(f"config datasets.{name}: source files not found ({why}); mark it "
                             f"'optional: true' to skip it when absent, or set data_dir/allow_download")
    if not datasets:
        raise ValueError("config datasets: no dataset is available")
    algos, skipped = algorithm_grids(cfg, registry)
    for name in skipped:
        warnings.append(f"algorithm {name!r} is not registered: skipped (missing_algorithms: skip)")
    if not algos:
        raise ValueError("config algorithms: no registered algorithm left")

    seeds = seed_list(cfg["seeds"])
    chunks = seed_chunks(seeds, cfg["seeds_per_job"])
    eps_values = {eps_label(e): float(e) for e in cfg["epsilons"]}
    if len(eps_values) != len(cfg["epsilons"]):
        raise ValueError(f"config epsilons {cfg['epsilons']} contain duplicates")
    curves = curve_epsilons(cfg)
    max_points = int(cfg["curves"]["max_points"])
    primary = cfg["conversion"]

    combos: list[tuple[str, str, str, str]] = []

    def runs_at(alg: str, e: str) -> bool:
        return algos[alg]["epsilons"] is None or e in algos[alg]["epsilons"]

    for ds in datasets:
        for alg in algos:
            for e in eps_values:
                if runs_at(alg, e):
                    combos.append((ds, alg, primary, e))
    for study in studies(cfg):
        names = study["algorithms"] or [study["algorithm"]]
        present = [a for a in names if a in algos]
        for a in names:
            if a not in algos:
                warnings.append(f"conversion_study algorithm {a!r} is not in algorithms: skipped in the study")
        for alg in present:
            for ds in study["datasets"] or list(datasets):
                if ds not in datasets:
                    continue
                for e in [eps_label(x) for x in (study["epsilons"] or cfg["epsilons"])]:
                    if not runs_at(alg, e):
                        continue
                    if e not in eps_values:
                        eps_values[e] = float(e)
                    for conv in study["conversions"]:
                        if conv != primary and (ds, alg, conv, e) not in combos:
                            combos.append((ds, alg, conv, e))

    jobs = []
    for ds, alg, conv, e in combos:
        for label, chunk_seeds in chunks:
            spec = {
                "dataset": ds, "dataset_options": datasets[ds]["options"], "algorithm": alg,
                "base_algorithm": algos[alg]["base"],
                "hyper": algos[alg]["hyper"], "conversion": conv, "primary": conv == primary,
                "epsilon": eps_values[e], "eps_label": e, "delta": cfg["delta"],
                "seeds": chunk_seeds, "iterations": algos[alg]["iterations"],
                "extend": extension_spec(cfg, algos[alg], e, datasets[ds]["max_passes"]),
                "curves_max_points": max_points if e in curves else 0,
            }
            if holdout is not None:
                spec["holdout"] = holdout
            if precision != "float64":
                spec["precision"] = precision
            jobs.append(Job(ds, alg, conv, e, label, spec))
    jobs = group_jobs(share_trajectories(jobs, algos, registry), registry, by_algorithm=grouping == "algorithm",
                      split=setting_of(cfg), slots=slots)
    return Plan(cfg, datasets, dropped, algos, skipped, jobs, curves, warnings, holdout, precision=precision,
                given=given)


def share_trajectories(jobs: list[Job], algos: dict[str, dict], registry) -> list[Job]:
    """One trajectory, every released model: jobs whose configurations differ only in ``average``
    (same dataset, registered algorithm, other hyper-parameters, conversion, epsilon and seeds) become
    one job, named by the first of them in config order, whose runs release every member's model
    (:attr:`dpnewton.algorithms.base.RunContext.averages`). Each member keeps its own T grid and
    extension rule (``spec['members']``, read by :func:`job_members`); the members' runs share their
    noise draws anyway (the run's identity names the registered algorithm), so every row has the bits
    a job of its configuration alone would give. Jobs of one configuration keep their spec and hash."""
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        base = job.spec["base_algorithm"]
        hyper = {k: v for k, v in job.spec["hyper"].items() if k != "average"}
        shared = registry[base].averaging if base in registry else False
        key = (job.dataset, job.conversion, job.eps, job.chunk, base, json.dumps(hyper, sort_keys=True, default=str),
               job.algorithm if not shared else "")
        groups.setdefault(key, []).append(job)
    out = []
    for key, members in groups.items():
        if len(members) == 1:
            out.append(members[0])
            continue
        owner = members[0]
        spec = {k: v for k, v in owner.spec.items() if k not in ("iterations", "extend")}
        spec["hyper"] = json.loads(key[5])
        spec["members"] = {m.algorithm: {"average": m.spec["hyper"].get("average", "none"),
                                         "hyper": m.spec["hyper"], "iterations": m.spec["iterations"],
                                         "extend": m.spec["extend"]} for m in members}
        out.append(Job(owner.dataset, owner.algorithm, owner.conversion, owner.eps, owner.chunk, spec))
    return out


#: the keys of the job specs of a group that are the same for every job (the others are its members')
GROUP_SHARED = ("dataset", "dataset_options", "base_algorithm", "delta", "seeds", "holdout", "precision")


def group_jobs(jobs: list[Job], registry, by_algorithm: bool = False, split=DEFAULT_SPLIT, slots: int | None = None
               ) -> list[Job]:
    """The jobs of one dataset, seed chunk and registered algorithm become one job, whatever their
    configurations, conversions and epsilons, when its card is ``lockstep`` (batched, one configuration
    per run: the group's runs step together in one batch, :func:`dpnewton.experiment.run_groups`) or when
    ``by_algorithm`` (the config's ``job_grouping: algorithm``; a card that is not lockstep runs the
    group's trajectories one after another, each as the batch its own job would run): :func:`job_groups`,
    split as ``job_split: split`` asks on ``slots`` job slots (:func:`.job_split.split_groups`), each part
    made one job by :func:`merged_job`."""
    return [merged_job(group) for group in split_groups(job_groups(jobs, registry, by_algorithm), split, slots)]


def job_groups(jobs: list[Job], registry, by_algorithm: bool = False) -> list[list[Job]]:
    """The groups of :func:`group_jobs`, each in config order (primary conversion first), in the place of its
    first job; a job that is not grouped is a group of its own."""
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        base = job.spec["base_algorithm"]
        grouped = by_algorithm or (base in registry and registry[base].lockstep)
        groups.setdefault((job.dataset, job.chunk, base) if grouped else (job.key,), []).append(job)
    return list(groups.values())


def merged_job(group: list[Job]) -> Job:
    """One job running every job of ``group``, named by its first job. Its spec keeps :data:`GROUP_SHARED`
    and lists every configuration x conversion x epsilon as a member (``spec['members']``, keyed
    ``<configuration>/<conversion>/eps~<epsilon>``; :func:`job_members`), each with its own T grid and
    extension rule; ``curves_max_points`` is the members' largest (whether the job stores curves). Each run
    keeps its own configuration, budget and generator, so its noise is that of a job of its own. A group of
    one job is that job (its spec and hash)."""
    if len(group) == 1:
        return group[0]
    owner = group[0]
    members = {f"{m['algorithm']}/{m['conversion']}/eps~{m['eps_label']}": m
               for job in group for m in job_members(job.spec).values()}
    spec = {k: owner.spec[k] for k in GROUP_SHARED if k in owner.spec}
    spec.update(algorithm=owner.algorithm, grouped=True, members=members,
                curves_max_points=max(m["curves_max_points"] for m in members.values()))
    return Job(owner.dataset, owner.algorithm, owner.conversion, owner.eps, owner.chunk, spec)


def protocol_summary(plan: Plan) -> dict:
    """The protocol facts the report and tables state (epsilon grid, delta rule, ...)."""
    cfg = plan.config
    seeds = seed_list(cfg["seeds"])
    holdout = {} if plan.holdout is None else {"holdout": {
        "fraction": plan.holdout,
        "split": "once per dataset, seeded from its name; runs, optimum and excess loss use the training "
                 "split, test_accuracy / test_log_loss the test split"}}
    return {
        "datasets": list(plan.datasets), "dropped_datasets": plan.dropped,
        "epsilons": [eps_label(e) for e in cfg["epsilons"]],
        "delta": "n^-2" if cfg["delta"] is None else cfg["delta"],
        "conversion": cfg["conversion"],
        "n_seeds": len(seeds), "seeds": seeds,
        "grids": {a: v["iterations"] for a, v in plan.algorithms.items()},
        "variants": {a: {"algorithm": v["base"], "hyper": v["hyper"]} for a, v in plan.algorithms.items()},
        "configurations_per_algorithm": configurations_per_algorithm(plan),
        "grid_extension": {a: ({"default": v["max_iterations"], **v["max_iterations_by_epsilon"]}
                               if v["max_iterations_by_epsilon"] else v["max_iterations"])
                           for a, v in plan.algorithms.items()}
        if cfg["tuning"]["extend_grid"] else {},
        "grid_extension_factor": int(cfg["tuning"]["factor"]) if cfg["tuning"]["extend_grid"] else None,
        "grid_extension_probe": bool(cfg["tuning"]["extend_grid"] and cfg["tuning"]["probe_first_seed"]),
        "shared_trajectories": shared_trajectories(plan),
        "conversion_studies": [{"algorithms": s["algorithms"] or [s["algorithm"]], "conversions": s["conversions"],
                                "datasets": s["datasets"], "epsilons": s["epsilons"]} for s in studies(cfg)],
        "dataset_max_passes": {ds: v["max_passes"] for ds, v in plan.datasets.items() if v["max_passes"] is not None},
        "selection": "best T = argmin over the T grid of the mean excess loss of the released model over seeds "
                     "(non-private tuning, as in the paper)",
        "n_jobs": len(plan.jobs), "config_hash": config_hash(cfg if plan.given is None else plan.given),
        **holdout, **({} if plan.precision == "float64" else {"precision": plan.precision}),
    }


def shared_trajectories(plan: Plan) -> dict[str, list[str]]:
    """{first configuration: the configurations whose models one trajectory releases} over the plan's jobs
    (:func:`trajectories` with more than one configuration)."""
    out: dict[str, list[str]] = {}
    for job in plan.jobs:
        members = job_members(job.spec)
        for keys in trajectories(job.spec).values():
            names = list(dict.fromkeys(members[k]["algorithm"] for k in keys))
            if len(names) > 1:
                out.setdefault(names[0], names)
    return out


def configurations_per_algorithm(plan: Plan) -> dict[str, int]:
    """Registered algorithm -> number of configurations (entries) tuned for it, excluding reset runs."""
    out: dict[str, int] = {}
    for v in plan.algorithms.values():
        if not v["hyper"].get("reset", False):
            out[v["base"]] = out.get(v["base"], 0) + 1
    return out
