# The private-selection and fixed-rule tracks (dpnewton.pipeline.tracks; config key `tracks`).


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


rule run_track:
    input:
        npz="results/data/{dataset}.npz",
        meta="results/data/{dataset}.json",
        optimum=OPTIMUM_NPZ,
        optimum_json=OPTIMUM_JSON,
    output:
        rows="results/tracks/{track}/{dataset}/{method}/eps~{eps}.csv",
    log:
        "logs/tracks/{track}/{dataset}/{method}/eps~{eps}.log",
    benchmark:
        "results/benchmarks/run_track/{track}/{dataset}/{method}/eps~{eps}.tsv"
    wildcard_constraints:
        track="private-selection|fixed-rule",
        method=r"[^/]+",
    conda:
        "../../envs/dpnewton.yaml"
    threads: 1
    params:
        spec=track_spec,
    message:
        "{wildcards.track}: {wildcards.method} on {wildcards.dataset}, eps={wildcards.eps}"
    script:
        "../scripts/run_track.py"


rule tracks_table:
    input:
        rows=lambda wildcards: all_track_rows(),
    output:
        private_selection=multiext("results/tables/private_selection", ".parquet", ".csv"),
        fixed_rule=multiext("results/tables/fixed_rule", ".parquet", ".csv"),
    log:
        "logs/tables/tracks.log",
    conda:
        "../../envs/dpnewton.yaml"
    script:
        "../scripts/tracks_table.py"
