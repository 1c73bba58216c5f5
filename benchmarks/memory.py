"""Peak memory (RSS) of one hess-clip run and one DP-GD batch per dataset, vs the size of Z.

For each dataset the parent prepares Z once and saves it as a plain .npy; then for each algorithm a
fresh child process (``python memory.py --child ...``) records ru_maxrss (Linux: KiB) after the
imports, after loading Z into a LogisticProblem, and after the run. Increments are expressed in
copies of Z (Z.nbytes). With the row-blocked core the passes over Z keep one block-sized work
buffer (row_block(d) rows, ~256 KiB), not an n x d copy, so a run's extra peak should be well below
one copy of Z: margins and gradients are O(n S), the SOI O(d^2).

    python benchmarks/memory.py [--datasets a1a synthetic adult protein]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import common

RUNS = {"hess-clip": dict(seeds=[0], T=5), "dp-gd": dict(seeds=list(range(10)), T=20),
        "dp-gd-single": dict(seeds=[0], T=20), "dp-sgd": dict(seeds=[0], T=200),
        "minibatch-hess-clip": dict(seeds=[0], T=20)}


def maxrss_bytes():
    """Peak RSS of this process image: VmHWM (reset at exec). resource.getrusage's ru_maxrss is
    *not* used for the numbers: Linux carries it over from the parent across fork+exec, so a child
    of a parent that loaded the data would report the parent's peak (recorded as ru_maxrss_*)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def rss_bytes():
    """Current RSS (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def ru_maxrss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(path, alg):
    from threadpoolctl import threadpool_limits

    from dpnewton.experiment import run_algorithm
    from dpnewton.loss import LogisticProblem

    # the RDP accountant imports dp_accounting on first use (tens of MiB of modules): import it
    # here so the minibatch runs' increments count data, not code
    from dp_accounting.rdp import rdp_privacy_accountant  # noqa: F401

    r0 = maxrss_bytes()
    Z = np.load(path)
    p = LogisticProblem(Z, name="mem")
    r1 = maxrss_bytes()
    # the load's transients (np.load, the row-norm / isfinite checks) set a high-water mark the run
    # may never reach; reset it so the run's own peak above the loaded steady state is visible
    was_reset = reset_hwm()
    r1_now = rss_bytes()
    spec = RUNS[alg]
    with threadpool_limits(1):
        run_algorithm(p, "mem", alg.replace("-single", ""), 1.0, spec["seeds"], spec["T"])
    r2 = maxrss_bytes()
    print(json.dumps({"rss_imports": r0, "rss_loaded": r1, "rss_loaded_now": r1_now, "hwm_reset": was_reset,
                      "rss_peak_run": r2, "z_bytes": Z.nbytes, "ru_maxrss_peak": ru_maxrss_bytes()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["a1a", "synthetic", "adult", "protein"])
    ap.add_argument("--child", nargs=2, metavar=("NPY", "ALG"))
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in args.datasets:
            p = common.load(ds, optimum=False)
            path = Path(tmp) / f"{ds}.npy"
            np.save(path, p.Z)
            del p
            for alg, spec in RUNS.items():
                out = subprocess.run([sys.executable, __file__, "--child", str(path), alg], capture_output=True,
                                     text=True, check=True, cwd=common.BENCH_DIR)
                m = json.loads(out.stdout.strip().splitlines()[-1])
                zb = m["z_bytes"]
                rows.append({"dataset": ds, "algorithm": alg, "runs_in_batch": len(spec["seeds"]), "T": spec["T"],
                             "Z_MiB": zb / 2**20, "rss_imports_MiB": m["rss_imports"] / 2**20,
                             "peak_after_load_MiB": m["rss_loaded"] / 2**20,
                             "rss_loaded_MiB": m["rss_loaded_now"] / 2**20, "hwm_reset": m["hwm_reset"],
                             "peak_during_run_MiB": m["rss_peak_run"] / 2**20,
                             "peak_rss_MiB": max(m["rss_loaded"], m["rss_peak_run"]) / 2**20,
                             "load_peak_in_Z": (m["rss_loaded"] - m["rss_imports"]) / zb,
                             "loaded_steady_in_Z": (m["rss_loaded_now"] - m["rss_imports"]) / zb,
                             "run_extra_in_Z": (m["rss_peak_run"] - m["rss_loaded_now"]) / zb,
                             "peak_minus_imports_in_Z":
                                 (max(m["rss_loaded"], m["rss_peak_run"]) - m["rss_imports"]) / zb,
                             "ru_maxrss_peak_MiB": m["ru_maxrss_peak"] / 2**20})
                print(rows[-1], flush=True)
    common.write_csv("memory.csv", rows)
    md = ["Peak RSS (VmHWM; see memory.py for why not ru_maxrss) of a fresh child process per (dataset, algorithm); "
          "Z loaded from a plain .npy. `*_in_Z` = increments in copies of Z (n x d float64): `load_peak` = "
          "high-water mark of loading over the import baseline, `loaded_steady` = RSS once loaded; the "
          "high-water mark is then reset (/proc/self/clear_refs) and `run_extra` = the run's own peak above "
          "the loaded RSS. `peak_minus_imports` = the process's overall peak. Runs: "
          + "; ".join(f"{a}: {len(s['seeds'])} run(s) in one call, T={s['T']}" for a, s in RUNS.items()) + ".", "",
          common.md_table(rows, ["dataset", "algorithm", "Z_MiB", "rss_imports_MiB", "peak_rss_MiB",
                                 "load_peak_in_Z", "loaded_steady_in_Z", "run_extra_in_Z", "peak_minus_imports_in_Z",
                                 "hwm_reset"],
                          {"Z_MiB": ".1f", "rss_imports_MiB": ".1f", "peak_rss_MiB": ".1f", "load_peak_in_Z": ".2f",
                           "loaded_steady_in_Z": ".2f", "run_extra_in_Z": ".3f", "peak_minus_imports_in_Z": ".2f"}), ""]
    common.write_section("memory", "\n".join(md))


if __name__ == "__main__":
    main()
