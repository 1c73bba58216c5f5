# Helpers only (no rules): config validation, experiment expansion, input functions.
import os
import re
import sys
from pathlib import Path

import jsonschema
from snakemake.exceptions import WorkflowError

# the workflow's checkout (two levels above this file), whichever Snakefile or module loads it
REPO = Path(str(workflow.current_basedir)).parents[1]
# where envs/dpnewton.post-deploy.sh installs the package from (--sdm conda)
os.environ.update(DPNEWTON_SOURCE=str(REPO))

# The job plan is built by the package while the workflow is parsed, so the Python that runs
# Snakemake needs it too (--sdm conda provides it to the jobs only).
try:
    from dpnewton.pipeline import config as pipecfg
    from dpnewton.pipeline import figures as pipefigures
    from dpnewton.pipeline import timing as pipetiming
    from dpnewton.problems import optimum_paths
except ImportError as exc:
    raise WorkflowError(
        f"the workflow builds its job plan with the dpnewton package while it is parsed, and "
        f"importing it failed ({exc}). Install it into the Python that runs Snakemake: "
        f"pip install -r {REPO / 'envs' / 'requirements.txt'} && pip install --no-deps {REPO}"
    ) from exc

# The one config entry (dpnewton.pipeline.config.load_config): `--config key=false` strings get the
# type the schema asks for, the schema validates, and its defaults are filled into `config` in place
# (so rules, scripts and report captions index it directly; the config hash is unchanged by this).
try:
    pipecfg.load_config(config, workflow.source_path("../schemas/config.schema.yaml"))
except jsonschema.ValidationError as exc:
    raise WorkflowError("Error validating config file.", exc)

PLAN = pipecfg.expand(config, base_dir=REPO)
JOBS = PLAN.job_index
DATASETS = list(PLAN.datasets)
ALGORITHMS = list(PLAN.algorithms)
PRIMARY = config["conversion"]
FIG = config["figures"]
FORMATS = FIG["formats"]
PROTOCOL = pipecfg.protocol_summary(PLAN)
STUDIES = pipecfg.studies(config)
STUDY = STUDIES[0] if STUDIES else {}
CLAIMS = config["claims"]
TIMING = config["timing"]
# test fraction of every dataset (dpnewton.holdout); None = off
HOLDOUT = PLAN.holdout
# the cached non-private optimum, where dpnewton.problems looks for it (with a holdout: the
# training split's, in files whose names hold the split)
OPTIMUM_NPZ, OPTIMUM_JSON = (str(p) for p in optimum_paths("results/data/{dataset}.npz", HOLDOUT))


wildcard_constraints:
    dataset="|".join(DATASETS),
    algorithm="|".join(re.escape(a) for a in ALGORITHMS),
    conversion="paper|bs16|cks|gdp|official-fsolve",
    eps=r"[0-9][0-9.e+-]*",
    chunk=r"\d+-\d+",


def log_plan():
    print(
        f"dpnewton pipeline: {len(PLAN.jobs)} optimizer jobs over datasets {DATASETS}, "
        f"algorithms {ALGORITHMS}, epsilons {PROTOCOL['epsilons']}, {PROTOCOL['n_seeds']} seeds, "
        f"conversion {PRIMARY} (config hash {PROTOCOL['config_hash']})",
        file=sys.stderr,
    )
    for w in PLAN.warnings:
        print(f"WARNING: {w}", file=sys.stderr)


def dataset_options(wildcards):
    return PLAN.datasets[wildcards.dataset]["options"]


def data_dir():
    d = pipecfg.resolve_data_dir(config["data_dir"], REPO)
    return str(d) if d is not None else None


def job_spec(wildcards):
    key = (wildcards.dataset, wildcards.algorithm, wildcards.conversion, wildcards.eps, wildcards.chunk)
    return JOBS[key].spec


def all_job_rows():
    return [f"{j.stem}.csv" for j in PLAN.jobs]


def all_job_curves():
    return [f"{j.stem}.curves.parquet" for j in PLAN.jobs if j.spec["curves_max_points"]]


def timed_configurations():
    """The configurations the timing stage times: those of Table 1, the runtime figure and the
    claims report's Table 1, with every tuned variant of their base algorithms."""
    anchors = [config["table1"]["baseline"], config["table1"]["ours"]] + FIG["runtime_algorithms"]
    if CLAIMS["enabled"]:
        anchors += [CLAIMS["baseline"], CLAIMS["table1_ours"]]
    names = pipetiming.configurations_to_time(PLAN.algorithms, anchors)
    return {n: {"base": PLAN.algorithms[n]["base"], "hyper": PLAN.algorithms[n]["hyper"]} for n in names}


TIMED = timed_configurations()


def timing_spec(wildcards):
    spec = {
        "dataset": wildcards.dataset,
        "configurations": TIMED,
        "repeats": TIMING["repeats"],
        "seconds_per_run": TIMING["seconds_per_run"],
        "epsilon": TIMING["epsilon"],
        "conversion": PRIMARY,
        "delta": config["delta"],
    }
    if HOLDOUT is not None:
        spec["holdout"] = HOLDOUT
    return spec


def all_timings():
    return expand("results/timing/{dataset}.csv", dataset=DATASETS) if TIMED else []


def all_optima():
    return expand(OPTIMUM_JSON, dataset=DATASETS)


def present(names):
    return [a for a in names if a in PLAN.algorithms]


def privacy_utility_algorithms():
    chosen = FIG["privacy_utility_algorithms"]
    if chosen:
        return present(chosen)
    mini = set(FIG["minibatch_algorithms"]) | {FIG["minibatch_baseline"]}
    return [a for a in ALGORITHMS if a not in mini and a != "dp-gd-oracle"]


def minibatch_algorithms():
    return present(FIG["minibatch_algorithms"] + [FIG["minibatch_baseline"]])


def figure_names():
    """The figures (dpnewton.pipeline.figures.FIGURES) this config makes."""
    made = {
        "fig4_minibatch": any(a != FIG["minibatch_baseline"] for a in minibatch_algorithms()),
        "fig5_conversions": len(PLAN.conversions()) > 1,
        "fig6_heldout": HOLDOUT is not None,
        "fig7_frontier": True,
    }
    names = [f for f in pipefigures.FIGURES if f in pipefigures.ALWAYS or made.get(f, False)]
    return names


def figure_files(folder="results/figures"):
    return expand(f"{folder}/{{fig}}.{{ext}}", fig=figure_names(), ext=FORMATS)


TABLES = ["runs", "summary", "best_T", "baseline", "update_costs", "table1", "table1_long"]
if HOLDOUT is not None:
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


def all_benchmarks():
    """Rule -> the benchmark files of its jobs (rule resources summarizes them)."""
    optimum = "optimum" if HOLDOUT is None else "optimum_holdout"
    out = {
        "prepare_data": expand("results/benchmarks/prepare_data/{dataset}.tsv", dataset=DATASETS),
        optimum: expand(f"results/benchmarks/{optimum}/{{dataset}}.tsv", dataset=DATASETS),
        "run_job": [j.stem.replace("results/runs/", "results/benchmarks/run_job/", 1) + ".tsv" for j in PLAN.jobs],
    }
    if TIMED:
        out["time_updates"] = expand("results/benchmarks/time_updates/{dataset}.tsv", dataset=DATASETS)
    return out


RESOURCE_TABLES = ["results/tables/resources.parquet", "results/tables/resources.csv"]


def final_outputs():
    out = table_files() + figure_files() + ["results/tables/best_curves.parquet"] + RESOURCE_TABLES
    if CLAIMS["enabled"]:
        out += claims_files()
    if config["publish_figures"]:
        out += figure_files("figures")
        if CLAIMS["enabled"]:
            out += claims_files("figures")
    return out
