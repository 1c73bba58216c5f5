"""Checks used by tests/cluster/run_slurm_test.sh (not a pytest module).

Subcommands:
  pick      output files of the first N jobs of a rule (from `snakemake --summary`)
  jobs      every optimizer job the SLURM run's main process finished was executed
            inside a SLURM job whose job-completion record says COMPLETED
  tables    two aggregate-table directories hold equal tables, timing columns aside
  state     print the final state of one SLURM job from the job-completion log
  group-of  print the group a rule is assigned to in a profile (empty if none)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

RULE_RE = re.compile(r"^\s*(?:local)?rule (\S+):\s*$")
OUTPUT_RE = re.compile(r"^\s+output: (.+)$")
JOBID_RE = re.compile(r"^\s+jobid: (\d+)\s*$")
MESSAGE_RE = re.compile(r"^\s*Job (\d+): (.+)$")   # indented: a member of a group job
FINISHED_RE = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)")
JOBCOMP_RE = re.compile(r"\bJobId=(\d+)\b.*?\bJobState=(\S+)")
# columns that legitimately differ between runs
# (columns named like *runtime*, *time*, *elapsed*, and runtime ratios)
TIMING_RE = re.compile(r"runtime|time|elapsed|(?:^|_)ratio(?:$|_)", re.IGNORECASE)
# provenance columns that legitimately differ between runs: where and when a run was made (a
# cluster node may be another machine) and the checkout's revision (a commit may land between the
# runs); dpnewton.pipeline.jobs.HOST_COLUMNS plus git_revision; and config_hash, the hash of the spec
# of the job a row came from: the SLURM run's plan, sized for its --jobs (config key job_split), splits
# jobs the local run keeps whole, so the same row comes from another job. Software versions are compared.
PROVENANCE_RE = re.compile(r"^(cpu_model|cpu_count|platform|blas_threads|timestamp_utc|git_revision|config_hash)$")
# tables whose numeric values are all derived from wall-clock times: only their
# shape, column names and non-numeric (key) columns are compared. The paper's
# Table 1 is a runtime ratio (DP-GD vs ours), its wide form has eps=... columns;
# update_costs holds the timing stage's per-update costs (and run lengths chosen
# from a timed warm-up); resources the jobs' measured wall time, CPU time and memory.
TIMING_TABLES = ("table1", "update_costs", "resources")


def finished_jobs(log_text: str, rule: str) -> set[str]:
    """Identities of the finished jobs of `rule` in a snakemake log.

    A job is announced either as a rule block ("rule R:" ... "output: ..." ...
    "jobid: N"; identity = its output list) or, for rules with a `message:`,
    as "Job N: <message>" (identity = the message); "Finished jobid: N (Rule: R)"
    marks it done. Job ids are unique within a run's log; in a group job's
    SLURM log the group runner uses the run's ids, while each member's inner
    snakemake calls its job 0, so id 0 may be ambiguous there (harmless: the
    runner's lines name every member).
    """
    ident: dict[str, str] = {}
    done: set[str] = set()
    pending_output = None
    for line in log_text.splitlines():
        if RULE_RE.match(line):
            pending_output = None
            continue
        m = OUTPUT_RE.match(line)
        if m:
            pending_output = m.group(1).strip()
            continue
        m = JOBID_RE.match(line)
        if m and pending_output is not None:
            ident[m.group(1)] = pending_output
            pending_output = None
            continue
        m = MESSAGE_RE.match(line)
        if m:
            ident[m.group(1)] = m.group(2).strip()
            continue
        m = FINISHED_RE.match(line)
        if m and m.group(2) == rule and m.group(1) in ident:
            done.add(ident[m.group(1)])
    return done


def read_jobcomp(path: Path) -> dict[str, str]:
    """SLURM job id -> last recorded JobState, from a jobcomp/filetxt file."""
    states: dict[str, str] = {}
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            m = JOBCOMP_RE.search(line)
            if m:
                states[m.group(1)] = m.group(2)
    return states


def cmd_jobs(args: argparse.Namespace) -> int:
    """The run's own optimizer jobs (its main log): the plan of a SLURM run, sized for its --jobs
    (config key job_split), need not be the local run's, sized for its --cores."""
    expected = finished_jobs(Path(args.main_log).read_text(errors="replace"), args.rule)
    if not expected:
        print(f"no finished '{args.rule}' jobs found in the run's main log {args.main_log}")
        return 1
    states = read_jobcomp(Path(args.jobcomp))
    logdir = Path(args.run_dir) / ".snakemake" / "slurm_logs"
    covered: dict[str, str] = {}  # job identity -> SLURM job id
    n_logs = 0
    for log in sorted(logdir.rglob("*.log")):
        n_logs += 1
        for job in finished_jobs(log.read_text(errors="replace"), args.rule):
            covered[job] = log.stem
    missing = sorted(expected - covered.keys())
    slurm_ids = sorted(set(covered.values()), key=int)
    bad = {j: states.get(j, "<no record>") for j in slurm_ids if states.get(j) != "COMPLETED"}
    print(
        f"{len(expected)} {args.rule} jobs finished in the run; {len(expected & covered.keys())} "
        f"of them finished inside SLURM jobs ({n_logs} SLURM job logs; {args.rule} ran in "
        f"SLURM jobs {', '.join(slurm_ids) or 'none'})"
    )
    print(f"job-completion log: {len(states)} SLURM jobs, states {sorted(set(states.values()))}")
    if missing:
        print(f"not executed by any SLURM job: {missing[:5]} ({len(missing)} in all)")
    if bad:
        print(f"SLURM jobs not COMPLETED: {bad}")
    return 1 if missing or bad else 0


def cmd_pick(args: argparse.Namespace) -> int:
    """Print the output files of the first N jobs of a rule, from `snakemake --summary`."""
    by_job: dict[str, list[str]] = {}
    for line in Path(args.summary).read_text().splitlines()[1:]:
        cols = line.split("\t")
        if len(cols) >= 4 and cols[2] == args.rule:
            by_job.setdefault(cols[3] or cols[0], []).append(cols[0])
    for key in sorted(by_job)[: args.n]:
        for f in by_job[key]:
            print(f)
    return 0 if by_job else 1


def _read_table(path: Path):
    import pandas as pd

    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".tsv":
        return pd.read_csv(path, sep="\t")
    return pd.read_csv(path)


def _ignored(column) -> bool:
    return bool(TIMING_RE.search(str(column)) or PROVENANCE_RE.search(str(column)))


def _normalise(df, timing_table=False):
    keep = [c for c in df.columns if not _ignored(c)]
    if timing_table:
        keep = [c for c in keep if not (df[c].dtype.kind in "fiu")]
    df = df[keep]
    if len(df.columns):
        df = df.sort_values(by=list(df.columns), kind="mergesort", na_position="last")
    return df.reset_index(drop=True)


def cmd_tables(args: argparse.Namespace) -> int:
    import pandas as pd

    a, b = Path(args.dir_a), Path(args.dir_b)
    suffixes = {".csv", ".tsv", ".parquet"}
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.suffix in suffixes}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.suffix in suffixes}
    if not files_a:
        print(f"no tables under {a}")
        return 1
    if files_a != files_b:
        print(f"different table sets: only in {a}: {sorted(map(str, files_a - files_b))}; "
              f"only in {b}: {sorted(map(str, files_b - files_a))}")
        return 1
    status = 0
    for rel in sorted(files_a):
        ta, tb = _read_table(a / rel), _read_table(b / rel)
        dropped = [c for c in ta.columns if _ignored(c)]
        if list(ta.columns) != list(tb.columns):
            print(f"{rel}: columns differ: {list(ta.columns)} vs {list(tb.columns)}")
            status = 1
            continue
        timing_table = rel.name.split(".")[0] in TIMING_TABLES
        if timing_table:
            dropped = [c for c in ta.columns if c not in _normalise(ta, True).columns]
        na, nb = _normalise(ta, timing_table), _normalise(tb, timing_table)
        try:
            pd.testing.assert_frame_equal(na, nb, check_exact=False, rtol=1e-9, atol=1e-12)
        except AssertionError as exc:
            print(f"{rel}: DIFFERENT\n{exc}")
            status = 1
            continue
        print(f"{rel}: equal ({len(na)} rows, {len(na.columns)} columns compared; "
              f"ignored timing/host columns: {dropped or 'none'})")
    return status


def cmd_state(args: argparse.Namespace) -> int:
    print(read_jobcomp(Path(args.jobcomp)).get(args.jobid, "UNKNOWN"))
    return 0


def cmd_group_of(args: argparse.Namespace) -> int:
    import yaml

    profile = yaml.safe_load(Path(args.profile).read_text()) or {}
    print((profile.get("groups") or {}).get(args.rule, ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("jobs")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--main-log", required=True, help="the log of the run's main snakemake process")
    p.add_argument("--jobcomp", required=True)
    p.add_argument("--rule", required=True)
    p.set_defaults(func=cmd_jobs)
    p = sub.add_parser("pick")
    p.add_argument("--summary", required=True)
    p.add_argument("--rule", required=True)
    p.add_argument("-n", type=int, default=4)
    p.set_defaults(func=cmd_pick)
    p = sub.add_parser("tables")
    p.add_argument("dir_a")
    p.add_argument("dir_b")
    p.set_defaults(func=cmd_tables)
    p = sub.add_parser("state")
    p.add_argument("--jobcomp", required=True)
    p.add_argument("--jobid", required=True)
    p.set_defaults(func=cmd_state)
    p = sub.add_parser("group-of")
    p.add_argument("--rule", required=True)
    p.add_argument("--profile", required=True)
    p.set_defaults(func=cmd_group_of)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
