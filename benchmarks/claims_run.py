"""Carry a long pipeline run across machines whose disks do not persist: ``save`` copies the run's
state into a directory that git can hold, ``restore`` puts it back so that ``snakemake
--rerun-incomplete`` goes on where the run stopped. The claims config needs far more CPU-hours than
one machine session gives (docs/pipeline.md), so its run travels in ``benchmarks/claims_run/``.

The state is what Snakemake and the jobs need to treat finished work as done and to resume the
unfinished jobs from their checkpoints:

* ``results/``, except what rule ``prepare_data`` writes (the prepared matrices
  ``results/data/<name>.npz`` and ``.json``, tens of MB each, its log and benchmark): restore runs
  it again on the checksummed datasets;
* ``logs/`` (``benchmarks/pipeline.py --analyze`` reads the jobs' progress lines);
* ``.snakemake/metadata/``, kept as ``snakemake-metadata/`` (each output's start and end time, parameters
  and inputs: Snakemake's rerun triggers and ``--analyze`` read them).

``restore`` copies the state back, runs ``prepare_data``, and checks every cached optimum against
the rebuilt matrix (the sha256 its JSON records): a mismatch stops the restore, because the jobs
would otherwise silently recompute the optimum. It then sets modification times in the DAG's order
(prepared data < optimum < everything else): a checkout stamps every file with the time it was
written, and Snakemake's mtime trigger would rerun the jobs whose inputs look newer.

    python benchmarks/claims_run.py save RUN_DIR [--archive benchmarks/claims_run]
    python benchmarks/claims_run.py restore RUN_DIR --configfile config/claims.yaml [--cores 2]
    python benchmarks/claims_run.py status --configfile config/claims.yaml [--archive ...]

``status`` counts, per dataset, the run and track jobs of the config's plan whose rows the archive
holds, and sums the CPU time of their benchmark records. It looks at presence only: a job whose
parameters changed since it ran is counted, and ``snakemake -n`` in the restored run directory
lists it for a rerun.
"""

from __future__ import annotations

import argparse
import base64
import filecmp
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from dpnewton.pipeline.config import load_config
from dpnewton.pipeline.plan import expand
from dpnewton.pipeline.resources import read_benchmark
from dpnewton.pipeline.tracks import expand_tracks
from dpnewton.problems import file_sha256

REPO_DIR = Path(__file__).resolve().parent.parent
DEFAULT_ARCHIVE = REPO_DIR / "benchmarks" / "claims_run"
# run directory -> archive (git ignores .snakemake/ everywhere)
STATE_DIRS = {"results": "results", "logs": "logs", ".snakemake/metadata": "snakemake-metadata"}
OPTIMUM_TAG = ".optimum."
PREPARE_DATA_LOGS = (Path("logs/prepare_data"), Path("results/benchmarks/prepare_data"))


def is_optimum(rel: Path) -> bool:
    return rel.parts[:2] == ("results", "data") and OPTIMUM_TAG in rel.name


def is_prepared_data(rel: Path) -> bool:
    """results/data/<name>.npz or .json, not the optimum cache beside it."""
    return rel.parts[:2] == ("results", "data") and len(rel.parts) == 3 and not is_optimum(rel)


def from_prepare_data(rel: Path) -> bool:
    """Written by rule prepare_data (its outputs, log and benchmark), which restore runs again."""
    return is_prepared_data(rel) or any(rel.is_relative_to(d) for d in PREPARE_DATA_LOGS)


def metadata_subject(rel: Path) -> Path | None:
    """The output a ``.snakemake/metadata`` record describes: its name is the path's urlsafe
    base64, cut into directory levels where it exceeds the file system's name length."""
    if rel.parts[:2] != (".snakemake", "metadata"):
        return None
    return Path(base64.urlsafe_b64decode("".join(rel.parts[2:])).decode())


def state_files(root: Path, archived: bool = False) -> dict[Path, Path]:
    """The state files under a run directory (or an archive): run-relative path -> file."""
    found = {}
    for top, stored in STATE_DIRS.items():
        base = root / (stored if archived else top)
        if base.is_dir():
            found.update((Path(top) / p.relative_to(base), p) for p in base.rglob("*") if p.is_file())
    return {rel: p for rel, p in found.items() if not from_prepare_data(metadata_subject(rel) or rel)}


def archive_path(archive: Path, rel: Path) -> Path:
    top = next(t for t in STATE_DIRS if rel.is_relative_to(t))
    return archive / STATE_DIRS[top] / rel.relative_to(top)


def save(run: Path, archive: Path) -> dict:
    """Mirror the run's state into ``archive``: copy new and changed files, delete files the run no
    longer has (the checkpoints of jobs that finished since the last save)."""
    if not (run / "results").is_dir():
        raise SystemExit(f"{run} has no results/: not a pipeline run directory")
    wanted, held = state_files(run), state_files(archive, archived=True)
    copied = 0
    for rel, src in sorted(wanted.items()):
        dst = archive_path(archive, rel)
        if dst.exists() and filecmp.cmp(src, dst, shallow=False):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        copied += 1
    stale = sorted(held.keys() - wanted.keys())
    for rel in stale:
        held[rel].unlink()
    for stored in STATE_DIRS.values():
        base = archive / stored
        for d in sorted(base.rglob("*"), reverse=True) if base.is_dir() else ():
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
    return {"files": len(wanted), "copied": copied, "deleted": len(stale)}


def check_optima(run: Path) -> list[str]:
    """Names of the datasets whose cached optimum was computed from this prepared matrix; raises on
    a mismatch or a missing matrix."""
    checked = []
    for js in sorted((run / "results" / "data").glob(f"*{OPTIMUM_TAG}json")):
        prepared = js.with_name(js.name.split(".")[0] + ".npz")
        recorded = json.loads(js.read_text())["prepared_sha256"]
        if not prepared.exists():
            raise SystemExit(f"{prepared} is missing after prepare_data: cannot check {js.name}")
        if file_sha256(prepared) != recorded:
            raise SystemExit(f"{prepared} was rebuilt with a different sha256 than {js.name} records "
                             f"({recorded[:12]}...): the archived runs belong to other data; do not resume them")
        checked.append(prepared.stem)
    return checked


def order_mtimes(run: Path) -> None:
    """Prepared data, then the optimum, then everything else, one second apart."""
    now = time.time()
    for rel in state_files(run).keys() | {p.relative_to(run) for p in (run / "results" / "data").glob("*")}:
        stamp = now - 2 if is_prepared_data(rel) else now - 1 if is_optimum(rel) else now
        os.utime(run / rel, (stamp, stamp))


def restore(run: Path, archive: Path, configfile: Path, cores: int) -> dict:
    held = state_files(archive, archived=True)
    if not held:
        raise SystemExit(f"{archive} holds no saved state")
    for rel, src in held.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, run / rel)
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), "--directory", str(run),
                    "--configfile", str(configfile.resolve()), "--until", "prepare_data"],
                   cwd=REPO_DIR, check=True)
    checked = check_optima(run)
    order_mtimes(run)
    return {"files": len(held), "optima_checked": checked}


def status(archive: Path, configfile: Path) -> dict:
    """Per dataset: finished / planned run jobs and track jobs, and the CPU-hours their benchmark
    records hold (the last attempt of each job; cut-off attempts are not counted)."""
    cfg = load_config(yaml.safe_load(configfile.read_text()))
    plan = expand(cfg, check_data=False)
    stems = [("run_job", job.dataset, job.stem) for job in plan.jobs]
    stems += [("run_track", spec["dataset"], stem) for stem, spec in expand_tracks(cfg, plan)]
    out: dict[str, dict] = {}
    for rule, dataset, stem in stems:
        rec = out.setdefault(dataset, {"run_job": [0, 0], "run_track": [0, 0], "cpu_h": 0.0})
        rec[rule][1] += 1
        if (archive / f"{stem}.csv").is_file():
            rec[rule][0] += 1
            kind = "runs" if rule == "run_job" else "tracks"
            bench = archive / stem.replace(f"results/{kind}/", f"results/benchmarks/{rule}/", 1)
            bench = bench.with_name(bench.name + ".tsv")
            if bench.is_file():
                rec["cpu_h"] += float(read_benchmark(bench)["cpu_time"].mean()) / 3600
    return {ds: {**r, "cpu_h": round(r["cpu_h"], 2)} for ds, r in out.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["save", "restore", "status"])
    parser.add_argument("run", type=Path, nargs="?", help="the pipeline's run directory (snakemake --directory)")
    parser.add_argument("--archive", type=Path, default=DEFAULT_ARCHIVE)
    parser.add_argument("--configfile", type=Path, help="restore and status: the run's config")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)
    if args.action != "save" and args.configfile is None:
        parser.error(f"{args.action} needs --configfile")
    if args.action != "status" and args.run is None:
        parser.error(f"{args.action} needs the run directory")
    if args.action == "save":
        summary = save(args.run, args.archive)
    elif args.action == "restore":
        args.run.mkdir(parents=True, exist_ok=True)
        summary = restore(args.run, args.archive, args.configfile, args.cores)
    else:
        summary = status(args.archive, args.configfile)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
