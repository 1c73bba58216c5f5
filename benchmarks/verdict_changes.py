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
from pathlib import Path

import pandas as pd

import common

NAME = "verdict_changes"
PUBLISHED = "figures/claims/claims.csv"
RUN_TABLE = Path("results") / "claims" / "claims.csv"
KEYS = ["claim", "setting", "conversion", "dataset"]
SIDES = ("published", "new")


def published_table(commit: str) -> pd.DataFrame:
    """``figures/claims/claims.csv`` as committed at ``commit``."""
    return pd.read_csv(io.BytesIO(common.committed_file(commit, PUBLISHED)))


def compare(old: pd.DataFrame, new: pd.DataFrame, sides: tuple[str, str] = SIDES) -> dict[str, pd.DataFrame]:
    """Matched rows and the rows only one side has.

    ``both`` holds ``verdict_<side>`` and ``ours_<side>`` for each of the two ``sides`` (default
    ``published``, ``new``); ``<side>_only`` holds the keys of the rows only that side has.
    """
    for side, frame in zip(sides, (old, new)):
        missing = [k for k in KEYS + ["verdict", "ours"] if k not in frame.columns]
        if missing:
            raise ValueError(f"the {side} claims table has no column(s) {missing}: is it a claims.csv?")
        dup = frame.duplicated(KEYS)
        if dup.any():
            raise ValueError(f"the {side} claims table repeats {int(dup.sum())} (claim, setting, conversion, "
                             "dataset) keys; one row per key is expected")
    merged = old[KEYS + ["verdict", "ours"]].merge(new[KEYS + ["verdict", "ours"]], on=KEYS, how="outer",
                                                   suffixes=tuple(f"_{side}" for side in sides), indicator=True)
    return {"both": merged[merged["_merge"] == "both"].drop(columns="_merge"),
            f"{sides[0]}_only": merged[merged["_merge"] == "left_only"][KEYS],
            f"{sides[1]}_only": merged[merged["_merge"] == "right_only"][KEYS]}


def changed_rows(both: pd.DataFrame, sides: tuple[str, str] = SIDES) -> pd.DataFrame:
    """The matched rows whose verdict differs between the two sides."""
    return both[both[f"verdict_{sides[0]}"] != both[f"verdict_{sides[1]}"]]


def _by_claim(rows: pd.DataFrame) -> list[dict]:
    return [{"claim": claim, "rows": len(g), "datasets": ", ".join(sorted(g["dataset"].unique())),
             "settings": ", ".join(sorted(g["setting"].unique()))}
            for claim, g in rows.groupby("claim", sort=True)]


def section(parts: dict[str, pd.DataFrame], commit: str, run_dir: Path) -> str:
    both = parts["both"]
    changed = changed_rows(both)
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
    commit = common.short_commit(args.commit)
    parts = compare(published_table(commit), pd.read_csv(table))
    if args.out is not None:
        common.RESULTS_DIR = args.out
    rows = parts["both"].assign(changed=parts["both"].index.isin(changed_rows(parts["both"]).index))
    common.write_csv(f"{NAME}.csv", rows.to_dict("records"))
    common.write_section(NAME, section(parts, commit, args.run_dir), readme=args.out is None)
    print(f"wrote {common.RESULTS_DIR / (NAME + '.md')}")


if __name__ == "__main__":
    main()
