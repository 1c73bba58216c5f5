"""The log parser of tests/cluster/slurm_checks.py (check (a) of run_slurm_test.sh) on the lines Snakemake 9
writes: a job with a `message:` alone, and as a member of a group job in a cluster run's main log (its job info
indented under the group's line, snakemake.jobs.GroupJob.log_info), each finished by `Finished jobid`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location("slurm_checks", Path(__file__).with_name("slurm_checks.py"))
slurm_checks = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(slurm_checks)

MAIN_LOG = """\
[Sat Dec  5 23:50:40 2026]
Job 3: hess-clip on a1a, eps=0.1, 1 (bs16), seeds 0-1
Reason: Missing output files: results/runs/a1a/hess-clip/bs16/eps~0.1/seeds~0-1.csv

[Sat Dec  5 23:50:41 2026] Group job optimizer_batch (jobs in lexicogr. order):
    [Sat Dec  5 23:50:41 2026]
    Job 7: dp-gd on a1a, eps=0.1 (bs16), seeds 0-1
    Reason: Missing output files: results/runs/a1a/dp-gd/bs16/eps~0.1/seeds~0-1.csv

    [Sat Dec  5 23:50:41 2026]
    Job 8: dp-gd on a1a, eps=1 (bs16), seeds 0-1
    Reason: Missing output files: results/runs/a1a/dp-gd/bs16/eps~1/seeds~0-1.csv

[Sat Dec  5 23:51:02 2026]
Finished jobid: 3 (Rule: run_job)
Finished jobid: 7 (Rule: run_job)
Finished jobid: 8 (Rule: aggregate)
"""


def test_finished_jobs_alone_and_in_a_group():
    assert slurm_checks.finished_jobs(MAIN_LOG, "run_job") == {
        "hess-clip on a1a, eps=0.1, 1 (bs16), seeds 0-1", "dp-gd on a1a, eps=0.1 (bs16), seeds 0-1"}
