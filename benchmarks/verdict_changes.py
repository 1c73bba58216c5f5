"""The verdicts of a new claims run against the published report: which stayed, which changed, which are new.

Both sides are a claims table (``claims.csv``: one row per claim, accounting setting, conversion and
dataset, with the report's ``verdict``). The published side is ``figures/claims/claims.csv`` at a git
commit (read with ``git show``); the new side is a run folder's ``results/claims/claims.csv``. Rows are
matched on (claim, setting, conversion, dataset). The section lists

* the number of matched rows whose verdict is unchanged,
* every matched row whose verdict changed, with both verdicts and both evidence strings (``ours``),
* the claims only one side has (a renamed or split claim, or a dataset only one run holds), by claim.

The cause of a change (the declared tuning, float32, the T-search probe, lockstep batching, the report's
own corrections) is not in the tables: it is written by hand in ``results/verdict_changes_discussion.md``,
which :func:`common.write_section` appends.

    python benchmarks/verdict_changes.py RUN_DIR [--commit HEAD] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import io
import subprocess
from pathlib import Path

import pandas as pd

import common

NAME = "verdict_changes"
PUBLISHED = "figures/claims/claims.csv"
RUN_TABLE = Path("results") / "claims" / "claims.csv"
KEYS = ["claim", "setting", "conversion", "dataset"]


def published_table(commit: str) -> pd.DataFrame:
    """``figures/claims/claims.csv`` as committed at ``commit``."""
    text = subprocess.run(["git", "show", f"{commit}:{PUBLISHED}"], cwd=common.REPO_DIR, check=True,
                          capture_output=True, text=True).stdout
    return pd.read_csv(io.StringIO(text))


def compare(old: pd.DataFrame, new: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Matched rows (``both``: old and new verdict and evidence), and the rows only one side has."""
    for side, frame in (("published", old), ("new", new)):
        missing = [k for k in KEYS + ["verdict", "ours"] if k not in frame.columns]
        if missing:
            raise ValueError(f"the {side} claims table has no column(s) {missing}: is it a claims.csv?")
        dup = frame.duplicated(KEYS)
        if dup.any():
            raise ValueError(f"the {side} claims table repeats {int(dup.sum())} (claim, setting, conversion, "
                             "dataset) keys; one row per key is expected")
    merged = old[KEYS + ["verdict", "ours"]].merge(new[KEYS + ["verdict", "ours"]], on=KEYS, how="outer",
                                                   suffixes=("_published", "_new"), indicator=True)
    return {"both": merged[merged["_merge"] == "both"].drop(columns="_merge"),
            "published_only": merged[merged["_merge"] == "left_only"][KEYS],
            "new_only": merged[merged["_merge"] == "right_only"][KEYS]}


def _by_claim(rows: pd.DataFrame) -> list[dict]:
    return [{"claim": claim, "rows": len(g), "datasets": ", ".join(sorted(g["dataset"].unique())),
             "settings": ", ".join(sorted(g["setting"].unique()))}
            for claim, g in rows.groupby("claim", sort=True)]


def section(parts: dict[str, pd.DataFrame], commit: str, run_dir: Path) -> str:
    both = parts["both"]
    changed = both[both["verdict_published"] != both["verdict_new"]]
    lines = [f"Published report: `{PUBLISHED}` at commit `{commit}`; new run: `{run_dir / RUN_TABLE}`.", "",
             f"**{len(both) - len(changed)} of {len(both)} matched rows keep their verdict; {len(changed)} "
             f"changed.** Rows only in the published report: {len(parts['published_only'])}; only in the "
             f"new run: {len(parts['new_only'])}.", ""]
    if len(changed):
        rows = changed.sort_values(KEYS).to_dict("records")
        lines += ["Changed verdicts:", "",
                  common.md_table(rows, KEYS + ["verdict_published", "verdict_new", "ours_published", "ours_new"]),
                  ""]
    for key, title in (("published_only", "Claims only in the published report"),
                       ("new_only", "Claims only in the new run")):
        if len(parts[key]):
            lines += [f"{title}:", "", common.md_table(_by_claim(parts[key]),
                                                      ["claim", "rows", "datasets", "settings"]), ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="the new run's folder (holds results/claims/claims.csv)")
    parser.add_argument("--commit", default="HEAD", help="the commit whose figures/claims/claims.csv is compared")
    parser.add_argument("--out", type=Path, default=None, help="write the CSV and section here instead")
    args = parser.parse_args(argv)
    table = args.run_dir / RUN_TABLE
    if not table.exists():
        raise SystemExit(f"{table} does not exist: give the folder of a finished claims run "
                         "(snakemake ... --configfile config/claims.yaml)")
    commit = subprocess.run(["git", "rev-parse", "--short", args.commit], cwd=common.REPO_DIR, check=True,
                            capture_output=True, text=True).stdout.strip()
    parts = compare(published_table(commit), pd.read_csv(table))
    if args.out is not None:
        common.RESULTS_DIR = args.out
    rows = parts["both"].assign(changed=parts["both"]["verdict_published"] != parts["both"]["verdict_new"])
    common.write_csv(f"{NAME}.csv", rows.to_dict("records"))
    common.write_section(NAME, section(parts, commit, args.run_dir), readme=args.out is None)
    print(f"wrote {common.RESULTS_DIR / (NAME + '.md')}")


if __name__ == "__main__":
    main()
