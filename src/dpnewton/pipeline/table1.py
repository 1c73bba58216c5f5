"""Table 1 of the paper (runtime to the baseline's best excess loss, and the speed-up) and the grid-edge
report, from the best-T table of :mod:`.aggregate`: as frames and as Markdown."""

from __future__ import annotations

import pandas as pd

from ..algorithms import ALGORITHMS
from .timing import runtime_column


def table1(best: pd.DataFrame, costs: dict[tuple[str, str], float], baseline: str, ours: str,
           conversion: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 1: runtime ratio baseline/ours at their best T, per dataset and epsilon.

    A runtime is a lone run's: first update + (best T - 1) x the configuration's per-update cost on
    the dataset (``costs``, from the timing stage, :mod:`dpnewton.pipeline.timing`), not the time recorded in
    the batched, concurrent run jobs. Returns (long, wide): long has one row per (dataset, epsilon)
    with both runtimes and the ratio; wide has one row per dataset, a ratio column per epsilon, and
    min/max of ours' runtime over epsilon (seconds), as in the paper.
    """
    b = best if conversion is None else best[best["conversion"] == conversion]
    b = b.assign(runtime_s=runtime_column(b, costs))
    cols = ["dataset", "epsilon", "best_T", "runtime_s", "excess_loss_mean"]
    x = b[b["algorithm"] == baseline][cols]
    y = b[b["algorithm"] == ours][cols]
    long = x.merge(y, on=["dataset", "epsilon"], suffixes=(f"_{_slug(baseline)}", f"_{_slug(ours)}"))
    rb, ro = f"runtime_s_{_slug(baseline)}", f"runtime_s_{_slug(ours)}"
    long["ratio"] = long[rb] / long[ro]
    long = long.sort_values(["dataset", "epsilon"]).reset_index(drop=True)
    if long.empty:
        return long, pd.DataFrame(columns=["dataset"])
    wide = long.pivot(index="dataset", columns="epsilon", values="ratio")
    wide.columns = [f"eps={_eps(e)}" for e in wide.columns]
    agg = long.groupby("dataset")[ro].agg(["min", "max"])
    wide[f"min runtime {ours} (s)"] = agg["min"]
    wide[f"max runtime {ours} (s)"] = agg["max"]
    return long, wide.reset_index()


def _slug(name: str) -> str:
    return name.replace("-", "_")


def _eps(e: float) -> str:
    return f"{float(e):g}"


def table1_markdown(wide: pd.DataFrame, baseline: str, ours: str, conversion: str) -> str:
    lines = [f"Table 1: runtime ratio T*({baseline}) / T*({ours}) at each algorithm's best T "
             f"(non-private selection of T; conversion {conversion}); last two columns: min and max "
             f"runtime of {ours} over epsilon (seconds). A runtime is that of a lone run of best T updates, from "
             "per-update costs timed in one process (results/tables/update_costs.csv; update steps only).", ""]
    if wide.empty:
        return "\n".join(lines + ["(no dataset has both algorithms)", ""])
    header = list(wide.columns)
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" for _ in header) + "|")
    for _, r in wide.iterrows():
        cells = []
        for c in header:
            v = r[c]
            if c == "dataset":
                cells.append(str(v))
            elif c.startswith("eps="):
                cells.append("" if pd.isna(v) else f"{v:.2f}x")
            else:
                cells.append("" if pd.isna(v) else f"{v:.3g}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def edges_markdown(best: pd.DataFrame) -> str:
    e = best[best["at_edge"]]
    probed = int((best["edge"] == "probed").sum())
    lines = ["# Best T at a grid edge", "",
             f"{len(e)} of {len(best)} (dataset, algorithm, conversion, epsilon) cells select the smallest "
             "('low', above T = 1) or largest ('high') T of their grid; widen the grid there. A best T = 1 is "
             "not an edge (no smaller T exists). *gain* = relative drop of the mean excess loss over the last "
             "step of the grid, from the neighbouring T to the best T: near 0 the cell is almost interior. "
             f"Not listed: {probed} cells ('probed') whose next T seed 0 ran alone and did worse there than every "
             "seed at the best T, which stopped the search (`tuning.probe_first_seed`).", ""]
    if len(e):
        lines += ["| dataset | algorithm | conversion | epsilon | best T | edge | mean at best T | neighbour T "
                  "| mean there | gain | grid |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for _, r in e.iterrows():
            lines.append(f"| {r['dataset']} | {r['algorithm']} | {r['conversion']} | {_eps(r['epsilon'])} | "
                         f"{r['best_T']} | {r['edge']} | {r['excess_loss_mean']:.3g} | {r['edge_neighbour_T']} | "
                         f"{r['edge_neighbour_mean']:.3g} | {r['edge_gain']:.0%} | {r['grid']} |")
        if "base_algorithm" in e:
            notes = [ALGORITHMS[b].edge_note for b in dict.fromkeys(e["base_algorithm"])
                     if b in ALGORITHMS and ALGORITHMS[b].edge_note]
            lines += [x for note in notes for x in ("", note)]
    return "\n".join(lines) + "\n"
