# Helpers only (no rules): the job plan, input functions and params functions.
#
# The workflow parses with the standard library and Snakemake alone (yaml comes with Snakemake): the
# dpnewton package is imported only inside the functions below, which Snakemake calls when it builds
# the DAG. So `snakemake --lint` and `--list-rules` work without the package
# (tests/workflow/test_parse_without_package.py); building the DAG (a run, -n, --dag, --report) needs it in
# the Python that runs Snakemake, and without it plan() stops with the install command.
import functools
import importlib
import os
import sys
from pathlib import Path

import yaml
from snakemake.exceptions import WorkflowError

# the workflow's checkout (two levels above this file), whichever Snakefile or module loads it
REPO = Path(str(workflow.current_basedir)).parents[1]
# where envs/dpnewton.post-deploy.sh installs the package from (--sdm conda)
os.environ.update(DPNEWTON_SOURCE=str(REPO))
SCHEMA = workflow.source_path("../schemas/config.schema.yaml")

# Output names are fixed at parse time, and two config values enter them: the figure formats and
# the holdout (its fraction is in the optimum's file names; with one, the aggregate rule writes the
# held-out tables). They are read here from the config as given (formats: the schema's default when
# absent); plan() checks them against the loaded config.
with open(SCHEMA) as _fh:
    _FIGURE_KEYS = yaml.safe_load(_fh)["properties"]["figures"]["properties"]
FORMATS = list((config.get("figures") or {}).get("formats", _FIGURE_KEYS["formats"]["default"]))
_HOLDOUT = config.get("holdout")
if isinstance(_HOLDOUT, str):  # `--config holdout=null` passes the string
    _HOLDOUT = yaml.safe_load(_HOLDOUT)
# off when absent, null or 0 (dpnewton.holdout.holdout_fraction)
HOLDOUT_ON = _HOLDOUT is not None and _HOLDOUT != 0
# the cached non-private optimum, where dpnewton.problems.optimum_paths looks for it (with a holdout:
# the training split's, in files whose names hold the fraction, dpnewton.holdout.holdout_label)
_OPTIMUM_STEM = "results/data/{dataset}"
if HOLDOUT_ON:
    try:
        _OPTIMUM_STEM += f".holdout~{float(_HOLDOUT)!r}"
    except (TypeError, ValueError):
        _OPTIMUM_STEM += f".holdout~{_HOLDOUT}"
OPTIMUM_NPZ, OPTIMUM_JSON = f"{_OPTIMUM_STEM}.optimum.npz", f"{_OPTIMUM_STEM}.optimum.json"


wildcard_constraints:
    # no dots: results/data/{dataset}.npz and {dataset}.optimum.npz stay distinct
    dataset=r"[A-Za-z0-9_-]+",
    algorithm=r"[^/]+",
    conversion="paper|bs16|cks|gdp|official-fsolve",
    eps=r"[0-9][0-9.e+-]*",
    chunk=r"\d+-\d+",
    fig=r"fig[0-9]+_[A-Za-z0-9_]+",
    ext=r"[a-z]+",


def dpnewton(module):
    """``dpnewton.<module>``, or a WorkflowError naming the install command when it is missing."""
    try:
        return importlib.import_module(f"dpnewton.{module}")
    except ImportError as exc:
        raise WorkflowError(
            f"building the workflow's job plan needs the dpnewton package in the Python that runs "
            f"Snakemake, and importing it failed ({exc}). Install it there: "
            f"pip install -r {REPO / 'envs' / 'requirements.txt'} && pip install --no-deps {REPO}"
        ) from exc


@functools.cache
def plan():
    """The job plan (dpnewton.pipeline.config.expand) of the config. The first call loads the config
    (dpnewton.pipeline.config.load_config): `--config key=false` strings get the type the schema asks
    for, the schema validates, and its defaults are filled into `config` in place, so rules, scripts
    and report captions index it directly (the config hash is unchanged by this). The jobs are sized
    for job_slots() (config key job_split); a job Snakemake runs in a process of its own (a cluster job)
    gets the main process's slots through the environment (dpnewton.pipeline.job_split.resolve_slots), so
    it builds the same plan. Every function below that reads `config` calls plan() (or conf()) first."""
    pipecfg = dpnewton("pipeline.config")
    import jsonschema

    try:
        pipecfg.load_config(config, SCHEMA)
    except (jsonschema.ValidationError, ValueError) as exc:
        # one line naming the key, the value, the rule and the fix (dpnewton.pipeline.schema)
        raise WorkflowError(str(exc)) from None
    try:
        split = dpnewton("pipeline.job_split")
        slots = split.resolve_slots(split.setting_of(config), workflow.is_main_process, job_slots(), os.environ)
    except ValueError as exc:
        raise WorkflowError(str(exc)) from None
    the_plan = pipecfg.expand(config, base_dir=REPO, slots=slots)
    paths = tuple(str(p) for p in dpnewton("problems").optimum_paths("results/data/{dataset}.npz", the_plan.holdout))
    if paths != (OPTIMUM_NPZ, OPTIMUM_JSON) or config["figures"]["formats"] != FORMATS:
        raise WorkflowError(
            f"config: the loaded holdout ({the_plan.holdout}) and figures.formats "
            f"({config['figures']['formats']}) differ from the values the output names were made of "
            f"({_HOLDOUT!r}, {FORMATS}); give holdout as a number (0 = off)"
        )
    log_plan(the_plan)
    return the_plan


def check_results():
    """Stop before the first job if a result file the workflow reads is damaged (dpnewton.io: a cut
    or changed CSV or parquet, a prepared file or optimum whose npz is not the one its JSON recorded).
    Snakemake reruns every job whose input is newer than its outputs (a damaged file is newer,
    and its checksum differs) and deletes those outputs before running the job, which then fails on the
    damaged input; stopping here deletes nothing. Run by onstart, in the main process."""
    if not workflow.is_main_process:
        return
    io = dpnewton("io")
    errors = io.damaged(result_checks())
    if errors:
        raise WorkflowError(f"{io.damage_report(errors)} (nothing was run or deleted)")


def result_checks():
    """(path, check) of every file of the plan that a rule reads (prepared data, optima, run and
    track rows, curves, timings; benchmark files without a digest, as written by Snakemake) and of the
    tables that figures and reports read."""
    io, agg = dpnewton("io"), dpnewton("pipeline.aggregate")
    problems, tracks, prepare = dpnewton("problems"), dpnewton("pipeline.tracks"), dpnewton("data.prepare")
    timing, resources = dpnewton("pipeline.timing"), dpnewton("pipeline.resources")
    checks = []
    for ds in datasets():
        npz, js = Path(f"results/data/{ds}.npz"), Path(f"results/data/{ds}.json")
        # both files, or none (prepare_data makes the pair): the npz against the SHA-256 its sidecar recorded
        checks.append((npz, lambda p, js=js: js.exists() and prepare.check_prepared_file(p)))
        checks.append((js, lambda p, npz=npz: npz.exists() or io.read_json(p, prepare.prepared_fix(npz))))
        opt_npz, opt_json = Path(OPTIMUM_NPZ.format(dataset=ds)), Path(OPTIMUM_JSON.format(dataset=ds))
        # both files, or none: one missing file is not damage (rule optimum makes the pair)
        checks.append((opt_npz, lambda p, js=opt_json: js.exists() and problems.check_optimum(p, js)))
    checks += [(p, lambda p: io.check_csv(p, min_rows=1, fix=agg.RUN_FIX)) for p in all_job_rows()]
    checks += [(p, lambda p: io.read_parquet(p, fix=agg.RUN_FIX)) for p in all_job_curves()]
    checks += [(p, lambda p: io.check_csv(p, min_rows=1, fix=tracks.ROWS_FIX)) for p in all_track_rows()]
    checks += [(p, lambda p: io.check_csv(p, min_rows=1, fix=timing.TIMING_FIX)) for p in all_timings()]
    checks += [
        (p, lambda p: io.check_csv(p, min_rows=1, fix=resources.BENCHMARK_FIX, sep="\t"))
        for paths in all_benchmarks().values()
        for p in paths
    ]
    return checks + table_checks()


def table_checks():
    """(path, check) of the tables: every parquet file read verified (page CRCs, frame digest), each
    CSV mirror against its twin (row count, SHA-256), and protocol.json against its own digest."""
    io, agg = dpnewton("io"), dpnewton("pipeline.aggregate")
    names = {
        "aggregate": TABLES + ["floor", "frontier"],
        "tracks_table": ["private_selection", "fixed_rule"],
        "resources": ["resources"],
    }
    checks = []
    for rule, tables in names.items():
        fix = f"delete it and run `snakemake {{path}}`: rule {rule} recomputes it"
        for t in tables:
            pq, csv = f"results/tables/{t}.parquet", f"results/tables/{t}.csv"
            checks += [
                (pq, lambda p, fix=fix: io.read_parquet(p, fix)),
                (csv, lambda p, pq=pq, fix=fix: agg.check_table_csv(p, pq, fix) if Path(pq).exists() else None),
            ]
    fix = "delete it and run `snakemake {path}`: rule aggregate recomputes it"
    return checks + [
        ("results/tables/best_curves.parquet", lambda p: io.read_parquet(p, fix)),
        ("results/tables/protocol.json", lambda p: io.read_json(p, fix)),
    ]


def conf():
    """The loaded config (schema defaults filled in)."""
    plan()
    return config


def primary(wildcards=None):
    return conf()["conversion"]


def figure_config(wildcards=None):
    return conf()["figures"]


def datasets():
    return list(plan().datasets)


def log_plan(the_plan):
    """What the run will do, on the console when the plan is first built, so also in a dry run: the
    config, the datasets dropped, the optimizer jobs left and their estimated duration on --cores
    (dpnewton.pipeline.scheduling.plan_lines). Main process only (a cluster job parses the workflow too)."""
    if not workflow.is_main_process:
        return
    protocol = dpnewton("pipeline.config").protocol_summary(the_plan)
    print(
        f"dpnewton pipeline: {len(the_plan.algorithms)} configurations of "
        f"{len({a['base'] for a in the_plan.algorithms.values()})} algorithms, epsilons {protocol['epsilons']}, "
        f"{protocol['n_seeds']} seeds, conversion {the_plan.config['conversion']} (config hash {protocol['config_hash']})",
        file=sys.stderr,
    )
    unit = "core" if workflow.local_exec else "job slot"  # a cluster run: --jobs jobs at once
    done = lambda job: Path(f"{job.stem}.csv").exists()
    for line in dpnewton("pipeline.scheduling").plan_lines(the_plan, job_slots(), done, unit):
        print(line, file=sys.stderr)


def job_slots():
    """The jobs the workflow runs at once: --cores, or with a cluster executor --jobs (None: not given).
    The plan sizes its jobs for them (config key job_split, dpnewton.pipeline.job_split)."""
    try:
        return workflow.cores if workflow.local_exec else workflow.nodes
    except WorkflowError:  # a dry run without --cores
        return None


@functools.cache
def _protocol():
    return dpnewton("pipeline.config").protocol_summary(plan())


def protocol_summary(wildcards=None):
    """The protocol facts (dpnewton.pipeline.config.protocol_summary), computed once."""
    return _protocol()


def holdout(wildcards=None):
    """The test fraction of every dataset (dpnewton.holdout); None = off."""
    return plan().holdout


def study(wildcards=None):
    studies = dpnewton("pipeline.config").studies(conf())
    return studies[0] if studies else {}


def conversions(wildcards=None):
    return plan().conversions()


def dataset_options(wildcards):
    return plan().datasets[wildcards.dataset]["options"]


def data_dir(wildcards=None):
    d = dpnewton("pipeline.config").resolve_data_dir(conf()["data_dir"], REPO, conf()["allow_download"])
    return str(d) if d is not None else None


def allow_download(wildcards=None):
    return conf()["allow_download"]


def job_spec(wildcards):
    """The job's serialised spec (dpnewton.pipeline.jobspec.JobSpec.to_dict: JSON-able, read back by from_dict)."""
    key = (wildcards.dataset, wildcards.algorithm, wildcards.conversion, wildcards.eps, wildcards.chunk)
    return plan().job_index[key].spec


def job_label(wildcards):
    """The job's message: every configuration, epsilon and conversion it runs (a grouped job runs several)."""
    return dpnewton("pipeline.plan").job_description(job_spec(wildcards))


def all_job_rows(wildcards=None):
    return [f"{j.stem}.csv" for j in plan().jobs]


def all_job_curves(wildcards=None):
    return [f"{j.stem}.curves.parquet" for j in plan().jobs if j.spec["curves_max_points"]]


@functools.cache
def timed_configurations():
    """The configurations the timing stage times: those of Table 1, the runtime figure and the
    claims report (its Table 1, and the second-order methods its "Beyond the paper" section compares
    with averaged DP-GD), with every tuned variant of their base algorithms."""
    cfg, algorithms = conf(), plan().algorithms
    anchors = [cfg["table1"]["baseline"], cfg["table1"]["ours"]] + cfg["figures"]["runtime_algorithms"]
    if cfg["claims"]["enabled"]:
        anchors += [cfg["claims"]["baseline"], cfg["claims"]["table1_ours"]]
        anchors += list(dpnewton("pipeline.frontier").SECOND_ORDER)
    names = dpnewton("pipeline.timing").configurations_to_time(algorithms, anchors)
    return {n: {"base": algorithms[n]["base"], "hyper": algorithms[n]["hyper"]} for n in names}


def timing_spec(wildcards):
    """The timing rule's spec (dpnewton.pipeline.timing.timing_spec: holdout and precision only when
    not the default, as in the run jobs' specs)."""
    return dpnewton("pipeline.timing").timing_spec(conf(), wildcards.dataset, timed_configurations(), holdout())


def all_timings(wildcards=None):
    return expand("results/timing/{dataset}.csv", dataset=datasets()) if timed_configurations() else []


def all_optima(wildcards=None):
    return expand(OPTIMUM_JSON, dataset=datasets())


def all_prepared(wildcards=None):
    return expand("results/data/{dataset}.npz", dataset=datasets())


def privacy_utility_algorithms(wildcards=None):
    return dpnewton("pipeline.figures").privacy_utility_names(plan(), figure_config())


def minibatch_algorithms(wildcards=None):
    return dpnewton("pipeline.figures").minibatch_names(plan(), figure_config())


def style_order(wildcards=None):
    """Every method's place in the figures' shared colour order (dpnewton.pipeline.figures.style_order)."""
    figures = dpnewton("pipeline.figures")
    return figures.style_order(plan(), figures.drawn_names(plan(), figure_config()))


def figure_names():
    """The figures this config makes (each entry's made() of dpnewton.pipeline.figures.SPECS)."""
    return dpnewton("pipeline.figures").figure_names(plan(), figure_config())


def figure_spec(name):
    """The figure's entry of dpnewton.pipeline.figures.SPECS."""
    try:
        return dpnewton("pipeline.figures").get_figure(name)
    except ValueError as exc:
        raise WorkflowError(str(exc)) from None


def figure_caption(wildcards):
    """The figure's report caption (dpnewton.pipeline.figures.Figure.caption)."""
    return figure_spec(wildcards.fig).caption(conf(), study())


def figure_inputs(wildcards):
    return figure_spec(wildcards.fig).input_files()


def figure_labels(ext):
    """The report labels of a figure's file in format ext (a function of the job's wildcards)."""
    return lambda wildcards: {"figure": figure_spec(wildcards.fig).title, "format": ext}


def figure_files(folder="results/figures"):
    return expand(f"{folder}/{{fig}}.{{ext}}", fig=figure_names(), ext=FORMATS)


def published_figures(wildcards=None):
    return figure_files("figures")


TABLES = ["runs", "summary", "best_T", "baseline", "update_costs", "table1", "table1_long"]
if HOLDOUT_ON:
    TABLES.append("heldout")


def table_files():
    out = expand("results/tables/{t}.parquet", t=TABLES) + expand("results/tables/{t}.csv", t=TABLES)
    return out + ["results/tables/table1.md", "results/tables/best_T_edges.md", "results/tables/protocol.json"]


def claims_files(folder="results"):
    if folder == "figures":
        return ["figures/claims.md"]
    return [
        "results/claims/claims.md",
        "results/claims/claims.csv",
        "results/claims/robustness.csv",
        "results/claims/divergence.csv",
    ]


def claims_bundle_tables():
    """The aggregate tables figures/claims/ carries (dpnewton.pipeline.claims.bundle.TABLES)."""
    names = [
        "best_T.csv",
        "best_T_edges.md",
        "table1.md",
        "update_costs.csv",
        "frontier.csv",
        "floor.csv",
        "protocol.md",
    ]
    return [f"results/tables/{n}" for n in names] + track_tables("csv") + [RESOURCE_TABLES[1]]


def claims_config(wildcards=None):
    return conf()["claims"]


def table1_config(wildcards=None):
    return conf()["table1"]


def all_benchmarks(wildcards=None):
    """Rule -> the benchmark files of its jobs (rule resources summarizes them)."""
    optimum = "optimum" if holdout() is None else "optimum_holdout"
    out = {
        "prepare_data": expand("results/benchmarks/prepare_data/{dataset}.tsv", dataset=datasets()),
        optimum: expand(f"results/benchmarks/{optimum}/{{dataset}}.tsv", dataset=datasets()),
        "run_job": [j.stem.replace("results/runs/", "results/benchmarks/run_job/", 1) + ".tsv" for j in plan().jobs],
    }
    if timed_configurations():
        out["time_updates"] = expand("results/benchmarks/time_updates/{dataset}.tsv", dataset=datasets())
    if track_jobs():
        out["run_track"] = [
            s.replace("results/tracks/", "results/benchmarks/run_track/", 1) + ".tsv" for s in track_jobs()
        ]
    return out


# the private-selection and fixed-rule tracks (rules/tracks.smk)
@functools.cache
def track_jobs():
    """Output stem -> job spec of every track job (none without a `tracks` config key)."""
    return dict(dpnewton("pipeline.tracks").expand_tracks(conf(), plan()))


def track_spec(wildcards):
    return track_jobs()[f"results/tracks/{wildcards.track}/{wildcards.dataset}/{wildcards.method}/eps~{wildcards.eps}"]


def all_track_rows():
    return [f"{stem}.csv" for stem in track_jobs()]


def track_tables(ext=None):
    """The tracks' tables (none without track jobs); ``ext`` = "parquet" or "csv" selects one format."""
    if not track_jobs():
        return []
    exts = [ext] if ext else ["parquet", "csv"]
    return [f"results/tables/{t}.{e}" for t in ("private_selection", "fixed_rule") for e in exts]


RESOURCE_TABLES = ["results/tables/resources.parquet", "results/tables/resources.csv"]


def browser_inputs(wildcards=None):
    """The tables the results browser (rule browser) reads; the verdicts when the claims are on."""
    out = {t: f"results/tables/{t}.parquet" for t in ("best_T", "summary", "floor")}
    out["protocol"] = "results/tables/protocol.json"
    if conf()["claims"]["enabled"]:
        out["claims"] = "results/claims/claims.csv"
    return out


def final_outputs(wildcards=None):
    cfg = conf()
    out = table_files() + figure_files() + ["results/tables/best_curves.parquet"] + RESOURCE_TABLES
    out.append("results/browser.html")
    out += track_tables()
    if cfg["claims"]["enabled"]:
        out += claims_files()
    if cfg["publish_figures"]:
        out += published_figures()
        if cfg["claims"]["enabled"]:
            out += claims_files("figures")
    return out


def job_priority(wildcards):
    """Rule run_job's priority: longest job first (dpnewton.pipeline.scheduling.priority, an int that
    grows with the log of the job's estimated cost; computed from its spec, no data file needed)."""
    return dpnewton("pipeline.scheduling").priority(job_spec(wildcards))


def data_priority(wildcards):
    """The data preparation's and the optimum's priority: above every optimizer job's, so that every
    dataset is ready before the first long job starts and the longest-first order spans all datasets."""
    return dpnewton("pipeline.scheduling").MAX_JOB_PRIORITY + 1
