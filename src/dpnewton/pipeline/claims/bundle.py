"""The published bundle of a claims run (rule ``publish_claims``): ``figures/claims.md`` and ``figures/claims/``.

The folder gets the run's figures, the report's CSVs, the tables the report reads (:data:`TABLES`,
those the run made) and a ``README.md`` written from the run's own records: ``protocol.json``, the
rows' code revisions and time stamps, and the cost of the run (:mod:`.cost`). Nothing in it is
written by hand, so a republication replaces the folder whole.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from ...io import atomic_path, atomic_write_text, read_json, read_parquet
from ..figures import SPECS
from ..tables import TABLE_FIX
from .cost import cost_section, run_cost

#: file name -> what it holds (the report's CSVs and the aggregate tables the bundle carries)
TABLES = {
    "claims.csv": "the verdicts, one row per claim x setting (`verdict_past_cap`, `cap_sensitive`, "
                  "`verdict_timing`, `timing_sensitive`)",
    "robustness.csv": "best T chosen on half of the seeds, reported on the others",
    "divergence.csv": "per cell, the fractions of runs that diverged, did worse than w = 0 or hit the reset",
    "best_T.csv": "every (dataset, configuration, conversion, epsilon) cell at its best T (**non-private** "
                  "selection: argmin over T of the mean excess loss over seeds), with the ridge-floor ratio",
    "best_T_edges.md": "the cells whose best T is at an edge of its grid",
    "table1.md": "Table 1: runtime ratio of DP-GD to the double-noise method at each one's best T",
    "update_costs.csv": "the timing stage: per dataset and configuration, a lone run's first update and its "
                        "cost per further update (medians over round-robin rounds)",
    "frontier.csv": "the compute-budget frontier: per budget, each method's best mean excess loss within it, with "
                    "its s.e. and seed count",
    "floor.csv": "the Gaussian ridge floor F* per cell (local quadratic model; not a lower bound)",
    "private_selection.csv": "the private-selection track (Papernot-Steinke selection inside the budget)",
    "fixed_rule.csv": "the fixed-rule track (no tuning)",
    "resources.csv": "resource use per rule (wall, CPU, peak memory) from the jobs' benchmark files",
    "protocol.md": "the run's protocol in words (datasets, epsilons, conversions, grids and caps, tuning "
                   "budget, selection rule)",
    "protocol.json": "the run's protocol: config hash, datasets and their sha256, grids and caps, "
                     "configurations, software and host",
}


def _figure_line(stems: list[str]) -> list[str]:
    return [f"* `{stem}.*`: {SPECS[stem].title}." for stem in stems if stem in SPECS]


def readme(protocol: dict, runs: pd.DataFrame, cost: pd.DataFrame | None, files: list[str]) -> str:
    """The bundle's README.md from the run's records (``files``: the names copied into the folder)."""
    revisions = runs["git_revision"].astype(str).value_counts().sort_index() if "git_revision" in runs else None
    stamps = pd.to_datetime(runs["timestamp_utc"], utc=True) if "timestamp_utc" in runs else None
    dropped = protocol["dropped_datasets"]
    L = ["# Claims run: figures and tables", "",
         "Written by `snakemake publish_claims` (`dpnewton.pipeline.claims.bundle`) from the run's own records; "
         "the report is [`../claims.md`](../claims.md).", "",
         f"* Config hash {protocol['config_hash']}; datasets {', '.join(protocol['datasets'])}"
         + (f" (left out: {', '.join(f'{k} ({v})' for k, v in dropped.items())})" if dropped else "")
         + f"; epsilons {', '.join(protocol['epsilons'])}; {protocol['n_seeds']} seeds; delta {protocol['delta']}; "
         f"primary conversion {protocol['conversion']}.",
         f"* {protocol['n_runs']} runs in {protocol['n_jobs']} jobs over {protocol['n_cells']} cells; "
         f"cells with the best T at a grid edge: {protocol['cells_at_grid_edge']} (`best_T_edges.md`). Grids, caps "
         "and every configuration: `protocol.json`."]
    if revisions is not None:
        L.append("* Rows per code revision: " + ", ".join(f"{rev} ({n})" for rev, n in revisions.items()) + ".")
    if stamps is not None and len(stamps):
        L.append(f"* Rows made between {stamps.min():%Y-%m-%d %H:%M} and {stamps.max():%Y-%m-%d %H:%M} UTC.")
    L.append("* Best T and configurations of the oracle-tuned track are selected **non-privately**, as in the paper"
             + ("; `private_selection.csv` is the private alternative." if "private_selection.csv" in files else "."))
    L += ["", "Files:", ""]
    L += _figure_line(sorted({Path(f).stem for f in files if f.startswith("fig")}))
    L += [f"* `{name}`: {TABLES[name]}." for name in TABLES if name in files]
    L += cost_section(cost)
    return "\n".join(L).rstrip() + "\n"


def write_bundle(report_md: str, sources: list[str], protocol_json: str, runs_parquet: str, out_md: str,
                 out_dir: str, benchmarks: dict | None = None, summary_figure: tuple[str, str] | None = None
                 ) -> list[str]:
    """Entry point of the rule: copy the report to ``out_md``, the summary heat map (``summary_figure``:
    source, destination; drawn by rule ``claims``) beside it and ``sources`` (figures and tables) into
    ``out_dir``, then write its README.md from ``protocol_json``, ``runs_parquet`` and the
    ``benchmarks`` files, all read verified before anything is written (:mod:`dpnewton.io`,
    :func:`~dpnewton.pipeline.resources.read_benchmark`: a damaged one raises
    :class:`~dpnewton.io.DamagedFileError`). Returns the names in the folder."""
    protocol = read_json(protocol_json, TABLE_FIX)
    runs = read_parquet(runs_parquet, TABLE_FIX)
    cost = run_cost(benchmarks, protocol["variants"]) if benchmarks else None
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for src, dst in [(report_md, out_md), *([summary_figure] if summary_figure else [])]:
        with atomic_path(dst, suffix=Path(dst).suffix) as tmp:
            shutil.copyfile(src, tmp)
    names = []
    for src in [*sources, protocol_json]:
        name = Path(src).name
        with atomic_path(folder / name, suffix=Path(name).suffix) as tmp:
            shutil.copyfile(src, tmp)
        names.append(name)
    atomic_write_text(folder / "README.md", readme(protocol, runs, cost, names))
    return sorted(names + ["README.md"])
