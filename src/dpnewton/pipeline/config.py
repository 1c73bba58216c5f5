"""Experiment config -> the list of optimizer jobs, plus stable hashes and labels.

A *job* is one (dataset, algorithm, conversion, epsilon, seed chunk); it runs every seed of its
chunk times every T of the algorithm's grid (see ``docs/pipeline.md`` for why). Everything that
determines a job's rows is collected in :attr:`Job.spec`; its hash is the ``config_hash`` column
of every row, so changing one algorithm's grid does not change the hash (or rerun) other jobs.
A ``holdout`` enters the specs (and the protocol) only when it is on, so the jobs of a config
without one keep their hashes.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

PRIMARY = "primary"
ALL_CONVERSIONS = ["paper", "bs16", "cks", "gdp", "official-fsolve"]


def config_hash(obj) -> str:
    """First 12 hex digits of sha256 over canonical JSON (sorted keys; keys as strings, so a YAML
    mapping that mixes ``10:`` and ``"0.5":`` keys hashes too)."""
    text = json.dumps(_string_keys(obj), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _string_keys(obj):
    if isinstance(obj, dict):
        return {str(k): _string_keys(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_string_keys(v) for v in obj]
    return obj


#: the spellings of a boolean that ``snakemake --config key=value`` passes on as a string (Snakemake
#: itself turns only ``True`` and ``False`` into booleans, and nested values stay strings)
BOOLEAN_WORDS = {"true": True, "yes": True, "on": True, "1": True,
                 "false": False, "no": False, "off": False, "0": False}


def coerce_cli_values(cfg: dict, schema: dict) -> dict:
    """Turn the strings that ``--config`` leaves where the JSON schema wants a boolean (or only a
    number) into that type, in place; returns ``cfg``.

    ``snakemake --config publish_figures=false`` passes the string ``"false"``, and
    ``--config 'claims={enabled: true}'`` a mapping of strings. A string at a key whose schema type
    is boolean (and not string) becomes ``True``/``False`` when it is one of :data:`BOOLEAN_WORDS`
    (any case), else it raises ``ValueError`` naming the key and the spellings to use (``--config
    key=0``/``=1``, which Snakemake passes as integers, become booleans there too); a string at a
    key typed number/integer (and not string) becomes that number when it parses as one (the schema
    then reports anything left). Other values are not touched.
    """
    defs = schema.get("$defs", {})

    def resolve(node):
        while isinstance(node, dict) and "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node if isinstance(node, dict) else {}

    def branches(node):
        node = resolve(node)
        alts = node.get("oneOf") or node.get("anyOf")
        return [node] + [b for alt in (alts or []) for b in branches(alt)]

    def fix(value, node, where):
        nodes = branches(node)
        if isinstance(value, str):
            types = set()
            for n in nodes:
                t = n.get("type", [])
                types |= set([t] if isinstance(t, str) else t)
            if "string" in types or not types:
                return value
            if "boolean" in types:
                word = value.strip().lower()
                if word in BOOLEAN_WORDS:
                    return BOOLEAN_WORDS[word]
                if not types & {"integer", "number", "null"}:
                    raise ValueError(f"config key {where}: {value!r} is not a boolean; write true or false "
                                     f"(True/False, yes/no, on/off and 1/0 work too), e.g. --config {where}=false"
                                     if "." not in where else
                                     f"config key {where}: {value!r} is not a boolean; write true or false "
                                     f"(True/False, yes/no, on/off and 1/0 work too)")
            for kind, parse in (("integer", int), ("number", float)):
                if kind in types:
                    try:
                        return parse(value)
                    except ValueError:
                        pass
            if "null" in types and value.strip().lower() in ("null", "none", "~"):
                return None
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
            types = {t for n in nodes for t in ([n["type"]] if isinstance(n.get("type"), str) else n.get("type", []))}
            return bool(value) if types == {"boolean"} else value
        if isinstance(value, dict):
            for key in list(value):
                sub = [n["properties"][key] for n in nodes if key in n.get("properties", {})]
                sub += [n["additionalProperties"] for n in nodes
                        if key not in n.get("properties", {}) and isinstance(n.get("additionalProperties"), dict)]
                if sub:
                    value[key] = fix(value[key], {"anyOf": sub}, f"{where}.{key}" if where else str(key))
            return value
        if isinstance(value, list):
            items = [n["items"] for n in nodes if isinstance(n.get("items"), dict)]
            if items:
                return [fix(v, {"anyOf": items}, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    fix(cfg, schema, "")
    return cfg


def eps_label(epsilon: float) -> str:
    """Path label of an epsilon: 0.01 -> '0.01', 1.0 -> '1', 10 -> '10' (round-trips via float)."""
    label = f"{float(epsilon):g}"
    if float(label) != float(epsilon):
        label = repr(float(epsilon))
    return label


def seed_list(seeds) -> list[int]:
    """``seeds`` is a count (seeds 0..k-1) or an explicit list of distinct non-negative ints."""
    if isinstance(seeds, int):
        return list(range(seeds))
    out = [int(s) for s in seeds]
    if len(set(out)) != len(out):
        raise ValueError(f"seeds {out} contain duplicates")
    return out


def seed_chunks(seeds: list[int], per_job: int | None) -> list[tuple[str, list[int]]]:
    """Split seeds into contiguous chunks of ``per_job`` (None: one chunk); label 'first-last'."""
    size = len(seeds) if not per_job else int(per_job)
    chunks = [seeds[i:i + size] for i in range(0, len(seeds), size)]
    return [(f"{c[0]}-{c[-1]}", c) for c in chunks]


def resolve_data_dir(data_dir: str | None, base_dir: str | Path) -> Path | None:
    """A relative data_dir is relative to the repository (the folder of the Snakefile)."""
    if data_dir in (None, ""):
        return None
    p = Path(data_dir).expanduser()
    return p if p.is_absolute() else (Path(base_dir) / p).resolve()


def dataset_available(name: str, data_dir: Path | None, allow_download: bool,
                      options: dict | None = None) -> tuple[bool, str]:
    """Can ``prepare(name, ...)`` find its source files without downloading? (ok, reason)."""
    from ..data import DatasetError
    from ..data.loaders import RESOLVERS, Context
    from ..data.registry import get_spec

    spec = get_spec(name)
    if not spec.sources or allow_download:
        return True, ""
    if data_dir is not None and not data_dir.is_dir():
        return False, f"data_dir {data_dir} does not exist"
    opts = dict(spec.options)
    opts.update({k: v for k, v in (options or {}).items() if k in opts})
    ctx = Context(data_dir, Path("resources/data"), verify=False, allow_download=False)
    try:
        RESOLVERS[spec.loader](spec, ctx, opts)
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
    spec: dict = field(hash=False, compare=False)

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

    @property
    def job_index(self) -> dict[tuple, Job]:
        return {j.key: j for j in self.jobs}

    def conversions(self) -> list[str]:
        return sorted({j.conversion for j in self.jobs})

    def base(self, name: str) -> str:
        """Registered algorithm run by the configuration ``name``."""
        return self.algorithms[name]["base"]

    def figure_algorithms_present(self, names) -> list[str]:
        return [a for a in names if a in self.algorithms]


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
    grids = cfg.get("grids", {})
    tuning = cfg.get("tuning") or {}
    for name, entry in cfg["algorithms"].items():
        entry = entry or {}
        base = entry.get("algorithm", name)
        if base not in registry:
            if cfg.get("missing_algorithms", "error") == "skip":
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
        cap = entry.get("max_iterations")
        if cap is None and tuning.get("extend_grid", False) and len(Ts) > 1:
            cap = Ts[-1] * int(tuning.get("factor", 2)) ** int(tuning.get("max_extensions", 2))
        if cap is not None and int(cap) < Ts[-1]:
            raise ValueError(f"config algorithms.{name}.max_iterations={cap} is below the grid maximum {Ts[-1]}")
        eps = entry.get("epsilons")
        labels = None if eps is None else [eps_label(e) for e in eps]
        out[name] = {"base": base, "iterations": Ts, "hyper": dict(entry.get("hyper") or {}),
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
        run_at |= {eps_label(e) for e in study.get("epsilons") or []}
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
    """``conversion_study`` as a list of enabled study entries (it may be one mapping or a list)."""
    raw = cfg.get("conversion_study") or []
    entries = [raw] if isinstance(raw, dict) else list(raw)
    return [e for e in entries if e.get("enabled", True)]


def extension_spec(cfg: dict, algo: dict, eps: str) -> dict | None:
    """Grid-extension rule of one algorithm's jobs at epsilon label ``eps`` (None: no extension)."""
    tuning = cfg.get("tuning") or {}
    cap = algo["max_iterations_by_epsilon"].get(eps, algo["max_iterations"])
    if not tuning.get("extend_grid", False) or cap is None:
        return None
    return {"factor": int(tuning.get("factor", 2)), "max_iterations": cap}


def curve_epsilons(cfg: dict) -> list[str]:
    """Epsilons whose per-iterate curves are stored: those Figures 1 and 3 plot."""
    fig = cfg.get("figures", {})
    eps = [fig.get("runtime_epsilon", 1.0)] + list(fig.get("convergence_epsilons", []))
    return sorted({eps_label(e) for e in eps if e is not None}, key=float)


def expand(cfg: dict, base_dir: str | Path = ".", registry=None, check_data: bool = True) -> Plan:
    """Expand a validated config into the job list (see module docstring)."""
    from ..holdout import holdout_fraction

    if registry is None:
        from ..algorithms import ALGORITHMS as registry
    warnings: list[str] = []
    holdout = holdout_fraction(cfg.get("holdout"))
    data_dir = resolve_data_dir(cfg.get("data_dir"), base_dir)
    datasets, dropped = {}, {}
    for name, entry in cfg["datasets"].items():
        entry = entry or {}
        options = dict(entry.get("options") or {})
        ok, why = (dataset_available(name, data_dir, cfg.get("allow_download", False), options)
                   if check_data else (True, ""))
        if ok:
            datasets[name] = {"options": options, "optional": bool(entry.get("optional", False))}
        elif entry.get("optional", False):
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
    chunks = seed_chunks(seeds, cfg.get("seeds_per_job"))
    eps_values = {eps_label(e): float(e) for e in cfg["epsilons"]}
    if len(eps_values) != len(cfg["epsilons"]):
        raise ValueError(f"config epsilons {cfg['epsilons']} contain duplicates")
    curves = curve_epsilons(cfg)
    max_points = int(cfg.get("curves", {}).get("max_points", 200))
    primary = cfg.get("conversion", "bs16")

    combos: list[tuple[str, str, str, str]] = []

    def runs_at(alg: str, e: str) -> bool:
        return algos[alg]["epsilons"] is None or e in algos[alg]["epsilons"]

    for ds in datasets:
        for alg in algos:
            for e in eps_values:
                if runs_at(alg, e):
                    combos.append((ds, alg, primary, e))
    for study in studies(cfg):
        names = study.get("algorithms") or [study.get("algorithm", "hess-clip")]
        present = [a for a in names if a in algos]
        for a in names:
            if a not in algos:
                warnings.append(f"conversion_study algorithm {a!r} is not in algorithms: skipped in the study")
        for alg in present:
            for ds in study.get("datasets") or list(datasets):
                if ds not in datasets:
                    continue
                for e in [eps_label(x) for x in (study.get("epsilons") or cfg["epsilons"])]:
                    if not runs_at(alg, e):
                        continue
                    if e not in eps_values:
                        eps_values[e] = float(e)
                    for conv in study.get("conversions", ALL_CONVERSIONS):
                        if conv != primary and (ds, alg, conv, e) not in combos:
                            combos.append((ds, alg, conv, e))

    jobs = []
    for ds, alg, conv, e in combos:
        for label, chunk_seeds in chunks:
            spec = {
                "dataset": ds, "dataset_options": datasets[ds]["options"], "algorithm": alg,
                "base_algorithm": algos[alg]["base"],
                "hyper": algos[alg]["hyper"], "conversion": conv, "primary": conv == primary,
                "epsilon": eps_values[e], "eps_label": e, "delta": cfg.get("delta"),
                "seeds": chunk_seeds, "iterations": algos[alg]["iterations"],
                "extend": extension_spec(cfg, algos[alg], e),
                "curves_max_points": max_points if e in curves else 0,
            }
            if holdout is not None:
                spec["holdout"] = holdout
            jobs.append(Job(ds, alg, conv, e, label, spec))
    return Plan(cfg, datasets, dropped, algos, skipped, jobs, curves, warnings, holdout)


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
        "delta": "n^-2" if cfg.get("delta") is None else cfg["delta"],
        "conversion": cfg.get("conversion", "bs16"),
        "n_seeds": len(seeds), "seeds": seeds,
        "grids": {a: v["iterations"] for a, v in plan.algorithms.items()},
        "variants": {a: {"algorithm": v["base"], "hyper": v["hyper"]} for a, v in plan.algorithms.items()},
        "configurations_per_algorithm": configurations_per_algorithm(plan),
        "grid_extension": {a: ({"default": v["max_iterations"], **v["max_iterations_by_epsilon"]}
                               if v["max_iterations_by_epsilon"] else v["max_iterations"])
                           for a, v in plan.algorithms.items()}
        if (cfg.get("tuning") or {}).get("extend_grid") else {},
        "selection": "best T = argmin over the T grid of the mean last-iterate excess loss over seeds "
                     "(non-private tuning, as in the paper)",
        "n_jobs": len(plan.jobs), "config_hash": config_hash(cfg),
        **holdout,
    }


def configurations_per_algorithm(plan: Plan) -> dict[str, int]:
    """Registered algorithm -> number of configurations (entries) tuned for it, excluding reset runs."""
    out: dict[str, int] = {}
    for v in plan.algorithms.values():
        if not v["hyper"].get("reset", False):
            out[v["base"]] = out.get(v["base"], 0) + 1
    return out


def is_finite_number(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
