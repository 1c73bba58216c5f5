"""The claims report's summary, read from the published tables alone: the "In short" section (tie sets,
not winners: :mod:`.ties`), one line per claim, a table of contents and the summary figure (method
family x (dataset, epsilon), coloured by the ratio to the lowest mean, ties marked).

It republishes ``figures/claims.md``'s summary and the README's copy from the committed bundle with no
run directory (the rest of the report is the run's, as ``snakemake publish_claims`` wrote it):

    python -m dpnewton.pipeline.claims.summary    # figures/claims.md, figures/claims_summary.png, README.md
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ...io import atomic_path, atomic_write_text, read_csv
import yaml
from ..frontier import SECOND_ORDER
from ..significance import ALPHA, STATED
from .cells import is_paper_method
from .headline import HEADING, floor_line, sync_readme, verdict_line
from .tie_columns import with_tie_columns
from .ties import config_ties, family_ties, mark_ties, tie_counts, tie_sets
from .tuning_tracks import (NEAR_ORACLE, TRACKS, label_variants, not_better_than_trivial, track_table,
                            track_ties, with_track_ties)
from .verdict import NOT, PARTLY, REPRODUCED
from .verdict import format_number as _fmt

#: the summary figure beside the report (committed under figures/)
FIGURE = "claims_summary.png"
TOC_HEADING = "## Contents"
#: the library's default: objective perturbation (tight profile), one configuration, no tuning
DEFAULT_CONFIGURATION = "objpert"


def _cell(ds: str, eps: float) -> str:
    return f"{ds}@{eps:g}"


def _counts(c: pd.Series, of: int) -> str:
    return ", ".join(f"{k} {v}" for k, v in c.items()) + f" (of {of} cells)"


def ties_lines(best: pd.DataFrame, conversion: str, tight: str | None) -> list[str]:
    """Tie sets of method families at their best T under ``conversion`` (and ``tight``): how often each
    family ties, the cells with one family alone, last-iterate DP-GD and the paper's Newton methods."""
    configs = config_ties(best, conversion)
    sets = tie_sets(configs)
    n = len(sets)
    if not n:
        return []
    alone = [f"{fams[0]} on {_cell(*k)}" for k, fams in sets.items() if len(fams) == 1]
    seeds = sorted(set(configs["n_seeds"].astype(int))) if "n_seeds" in configs else []
    L = [f"* **Lowest loss at the best T** ({n} (dataset, epsilon) cells, `{conversion}`; {'/'.join(map(str, seeds))} "
         "seeds per configuration; T and configuration chosen on the true loss, which is **not private**): no method "
         f"is significantly best in {n - len(alone)} of {n} cells. Cells in each family's tie set: "
         + _counts(tie_counts(sets), n) + "."
         + (f" One family alone: {', '.join(alone)}." if alone else "")]
    paper = [k for k, fams in sets.items() if any(f in SECOND_ORDER and is_paper_method(f) for f in fams)]
    gd = family_ties(configs)
    gd = gd[gd["family"] == "dp-gd"]
    L.append("  The paper's second-order methods (last iterate, any declared configuration) tie in "
             f"{len(paper)} of {n} "
             + (f"({', '.join(_cell(*k) for k in paper)})" if paper else "") + "; last-iterate DP-GD ties in "
             f"{int(gd['tied'].sum())} of {n}, its lowest mean {_fmt(float(gd['ratio'].median()))}x the cell's "
             "lowest (median).")
    if tight and (best["conversion"] == tight).any():
        t = tie_sets(config_ties(best, tight))
        changed = sum(set(t.get(k, [])) != set(v) for k, v in sets.items())
        L.append(f"* **On equal accounting terms** (every method under `{tight}`, objective perturbation by its own "
                 f"tight profile): cells in each family's tie set: {_counts(tie_counts(t), len(t))}; the tie set "
                 f"differs from `{conversion}`'s in {changed}.")
    return L


def floor_lines(best: pd.DataFrame, floor: pd.DataFrame, conversion: str) -> list[str]:
    """F* beside the lowest mean of each cell and F*'s own mechanism on the true loss."""
    b = config_ties(best, conversion)
    top = b.sort_values("excess_loss_mean").groupby(["dataset", "epsilon"], sort=True).head(1)
    f = floor[floor["conversion"] == conversion][["dataset", "epsilon", "ridge_floor", "mechanism_excess_loss"]]
    m = top[["dataset", "epsilon", "excess_loss_mean"]].merge(f, on=["dataset", "epsilon"])
    frame = pd.DataFrame({"best_over_floor": m["excess_loss_mean"] / m["ridge_floor"],
                          "mechanism_over_floor": m["mechanism_excess_loss"] / m["ridge_floor"]})
    return floor_line(frame)


def tracks_lines(long: pd.DataFrame, floor: pd.DataFrame, best: pd.DataFrame, variants: set, conversion: str,
                 tight: str | None) -> list[str]:
    """Tie sets per track, private selection against the oracle-tuned loss, w = 0, and the library default."""
    if not len(long):
        return []
    n = long[["dataset", "epsilon"]].drop_duplicates().shape[0]
    parts = [f"{TRACKS[track]}: {_counts(tie_counts(sets), n)}" for track, sets in track_ties(long).items()]
    wide = long.pivot_table(index=["dataset", "epsilon", "algorithm"], columns="track",
                            values="excess_loss_mean").reset_index()
    ratio = (wide["private-selection"] / wide["oracle-tuned"]).groupby(wide["algorithm"]).median().dropna()
    oracle = long[long["track"] == "oracle-tuned"]
    missed = oracle.groupby("algorithm")["best_T_not_a_candidate"].sum().astype(int).reindex(ratio.index)
    L = [f"* **Tuning paid for privately** (tie sets per track and cell, {n} cells): " + "; ".join(parts) + ".",
         "  Private selection's loss / the oracle-tuned loss, median over cells: "
         + ", ".join(f"{k} {_fmt(float(v))}x" for k, v in ratio.items())
         + "; the factor mixes the cost of privacy with the candidate T lists, which miss the oracle's best T in "
         + ", ".join(f"{k} of {n} cells for {m}" for m, k in missed.items()) + "."]
    trivial = floor[floor["conversion"] == conversion].drop_duplicates("dataset").set_index("dataset")
    sel = wide.assign(selection=wide["private-selection"],
                      trivial=wide["dataset"].map(trivial["trivial_excess_loss"]))
    worse = sel[not_better_than_trivial(sel, "selection")]
    rated = int(np.isfinite(sel["selection"].astype(float)).sum())
    L.append(f"  The privately selected model is no better than w = 0 in {len(worse)} of {rated} (method, cell) pairs.")
    L += default_lines(wide, best, variants, conversion, tight)
    return L


def default_lines(wide: pd.DataFrame, best: pd.DataFrame, variants: set, conversion: str,
                  tight: str | None) -> list[str]:
    """The library default (objpert's fixed rule, tight profile) against the lowest oracle-tuned mean of the
    tracks' methods (their declared ``variants``) under ``conversion`` and, where the best-T table has them,
    under ``tight``: objpert's tight profile against a ``conversion`` reference favours the default."""
    own = wide[wide["algorithm"] == DEFAULT_CONFIGURATION].set_index(["dataset", "epsilon"])["fixed-rule"]
    if not len(own):
        return []
    out = []
    for conv in (conversion, tight):
        if conv is None:
            continue
        if conv == conversion:
            ref = wide.groupby(["dataset", "epsilon"])["oracle-tuned"].min()
        else:
            b = best[(best["conversion"] == conv) & best["algorithm"].isin(variants)]
            ref = b.groupby(["dataset", "epsilon"])["excess_loss_mean"].min() if len(b) else pd.Series(dtype=float)
        r = (own / ref.reindex(own.index)).dropna()
        if len(r):
            track_note = " (as the fixed-rule track reads it)" if conv == conversion else ""
            out.append(f"`{conv}` reference{track_note}: within {NEAR_ORACLE:g}x in "
                       f"{int((r <= NEAR_ORACLE).sum())} of {len(r)} "
                       f"cells, median {_fmt(float(r.median()))}x")
    return [f"  The library's default (`{DEFAULT_CONFIGURATION}`, its tight profile, no tuning) against the lowest "
            "oracle-tuned mean of the tracks' methods: " + "; ".join(out) + "."] if out else []


def cost_line(resources: pd.DataFrame | None, cores: int = 2) -> list[str]:
    """The run's cost from the published resources table (``n_jobs``, ``wall_s_sum``, ``cpu_s_sum`` per rule)
    or from :func:`~.cost.run_cost`'s frame (``jobs``, ``wall_s``, ``cpu_s`` per part)."""
    if resources is None or not len(resources):
        return []
    jobs, wall, cpu = (("n_jobs", "wall_s_sum", "cpu_s_sum") if "n_jobs" in resources else ("jobs", "wall_s", "cpu_s"))
    wall, cpu, jobs = float(resources[wall].sum()), float(resources[cpu].sum()), int(resources[jobs].sum())
    return [f"* **Cost of the run**: {jobs} jobs, {_fmt(wall / 3600)} job-hours "
            f"({_fmt(cpu / 3600)} CPU-hours), {_fmt(wall / 3600 / cores)} hours on {cores} cores."]


def in_short(verdicts, best, floor, tracks, tracks_cfg, resources, conversion="bs16", tight="gdp") -> list[str]:
    """The "In short" section: the tie rule, the verdict counts, tie sets, F*, the tracks and the cost."""
    L = [HEADING, "", STATED, "", verdict_line(verdicts)]
    L += ties_lines(best, conversion, tight)
    L += floor_lines(best, floor, conversion)
    if tracks is not None and len(tracks):
        variants = {v for vs in label_variants(tracks_cfg).values() for v in vs}
        L += tracks_lines(track_table(tracks, best, tracks_cfg, conversion), floor, best, variants, conversion, tight)
    L += cost_line(resources)
    return L + [""]


TIES_HEADING = "## Tie sets per cell"


def tie_section(best: pd.DataFrame, conversion: str) -> list[str]:
    """Per (dataset, epsilon): the lowest mean (its configuration and T) and the method families within noise
    of it (:data:`~dpnewton.pipeline.significance.TIE_RULE`), with how many configurations tie."""
    configs = config_ties(best, conversion)
    if not len(configs):
        return []
    L = [TIES_HEADING, "", f"`{conversion}`, every private configuration at its best T (**non-private** "
         f"selection). {STATED}", "",
         "| dataset | eps | lowest mean (configuration, T) | tie set: families (configurations) |", "|---|---|---|---|"]
    for (ds, eps), g in configs.groupby(["dataset", "epsilon"], sort=True):
        top = g.loc[g["excess_loss_mean"].astype(float).idxmin()]
        tied = g[g["tied"]].sort_values("ratio")
        fams = ", ".join(f"{f} ({int((tied['family'] == f).sum())})" for f in dict.fromkeys(tied["family"]))
        L.append(f"| {ds} | {eps:g} | {_fmt(float(top['excess_loss_mean']))} ± {_fmt(float(top['excess_loss_se']), 2)} "
                 f"({top['algorithm']}, {int(top['best_T'])}) | {fams} |")
    return L + [""]


def overall(verdicts: pd.Series) -> str:
    """One verdict for a claim's rows: reproduced (all), not reproduced (none reproduced or partly), else partly."""
    v = set(verdicts.astype(str))
    if v == {REPRODUCED}:
        return REPRODUCED
    return NOT if not v & {REPRODUCED, PARTLY} else PARTLY


def claim_rows(verdicts: pd.DataFrame, best: pd.DataFrame, conversion: str, setting: str = "a") -> list[tuple]:
    """(claim, verdict, one number) per claim of ``setting``; C1's number counts the cells where the paper's
    Newton methods (released defaults) tie with DP-GD under :data:`~dpnewton.pipeline.significance.TIE_RULE`."""
    rows = []
    for claim, g in verdicts[verdicts["setting"] == setting].groupby("claim", sort=True):
        number = f"{int((g['verdict'] == REPRODUCED).sum())} of {len(g)} datasets reproduced"
        median = re.search(r"median ([0-9.]+x)", str(g["reason"].iloc[0]))
        if len(g) == 1 and median:
            number = f"median ratio {median.group(1)}"
        elif claim.startswith("C1 best"):
            number += "; " + c1_support(best, conversion)
        if "Oracle" in claim or "damped Newton" in claim:
            claim += " [non-private baseline]"
        rows.append((claim, overall(g["verdict"]), number))
    return rows


def c1_support(best: pd.DataFrame, conversion: str) -> str:
    """In how many cells a Newton method at its released defaults ties with DP-GD's lowest mean (tie rule)."""
    b = best[(best["conversion"] == conversion) & best["algorithm"].isin(["dp-gd", "hess-clip", "hess-add", "qu-clip",
                                                                           "qu-add"])]
    marked = [mark_ties(g) for _, g in b.groupby(["dataset", "epsilon"], sort=True)]
    tied = sum(bool(m[m["algorithm"] != "dp-gd"]["tied"].any()) for m in marked)
    seeds = "/".join(map(str, sorted(set(b["n_seeds"].astype(int)))))
    return (f"a Newton method at its released defaults is not significantly above DP-GD in {tied} of {len(marked)} "
            f"cells ({seeds} seeds each)")


def claim_table(rows: list[tuple]) -> list[str]:
    L = ["| claim (setting a) | verdict | number |", "|---|---|---|"]
    return L + [f"| {c} | {v} | {n} |" for c, v, n in rows]


def contents(report_md: str) -> list[str]:
    """A table of contents of the report's level-2 headings (GitHub's anchors)."""
    out = [TOC_HEADING, ""]
    for h in re.findall(r"^## (.+)$", report_md, flags=re.M):
        if h == TOC_HEADING[3:]:
            continue
        anchor = re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
        out.append(f"* [{h}](#{anchor})")
    return out + ["", f"![Method family x (dataset, epsilon): ratio to the lowest mean, ties marked]({FIGURE})", ""]


def heatmap(configs: pd.DataFrame, path: Path, conversion: str) -> None:
    """Method family x (dataset, epsilon), coloured by log10 of the family's lowest mean / the cell's lowest
    (capped at 10x), a family in the tie set marked with a dot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fam = family_ties(configs)
    cols = sorted({(d, e) for d, e in zip(fam["dataset"], fam["epsilon"])})
    order = fam.groupby("family")["tied"].sum().sort_values(ascending=False).index.tolist()
    grid = np.full((len(order), len(cols)), np.nan)
    tied = np.zeros_like(grid, dtype=bool)
    for r in fam.itertuples():
        i, j = order.index(r.family), cols.index((r.dataset, r.epsilon))
        grid[i, j], tied[i, j] = np.log10(max(r.ratio, 1.0)), r.tied
    fig, ax = plt.subplots(figsize=(0.42 * len(cols) + 2.8, 0.32 * len(order) + 1.6))
    im = ax.imshow(np.minimum(grid, 1.0), cmap="viridis_r", vmin=0, vmax=1, aspect="auto")
    ii, jj = np.nonzero(tied)
    ax.scatter(jj, ii, s=14, c="white", edgecolors="black", linewidths=0.6)
    ax.set_xticks(range(len(cols)), [f"{d} {e:g}" for d, e in cols], rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(order)), order, fontsize=7)
    bar = fig.colorbar(im, ax=ax, ticks=[0, np.log10(2), np.log10(5), 1])
    bar.ax.set_yticklabels(["1x", "2x", "5x", ">=10x"], fontsize=7)
    bar.set_label("family's lowest mean / cell's lowest", fontsize=7)
    ax.set_title(f"Excess loss at the best T ({conversion}; T chosen non-privately); dot = in the tie set "
                 f"(not significantly above the cell's lowest, Welch p >= {ALPHA:g})", fontsize=8)
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=130, format="png")
    plt.close(fig)


#: the report's sections that name a "best" or "winner", each given :data:`RANK_NOTE` unless its first paragraph
#: states the tie rule (:data:`~dpnewton.pipeline.significance.STATED`: it tests its ranking against seed noise)
RANKED_SECTIONS = ("## Winner by compute budget", "## Beyond the paper", "## Ranking on equal accounting terms",
                   "## Tuning paid for privately")
RANK_NOTE_START = "*Best*, *lowest* and *winner* in this section"
RANK_NOTE = (f"{RANK_NOTE_START} mean the lowest mean, with no test against seed noise. The method families "
             "within noise of it (the tie rule) are the last column of a table that has one, [Tie sets per "
             "cell](#tie-sets-per-cell) and the summary figure.")


def _note_rankings(body: str) -> str:
    """Put :data:`RANK_NOTE` under each heading of :data:`RANKED_SECTIONS` whose section does not open by
    stating the tie rule (once, replacing an earlier wording of the note)."""
    body = re.sub(r"^\*Best\*[^\n]* in this section mean the lowest mean[^\n]*\n\n", "", body, flags=re.M)
    for head in RANKED_SECTIONS:
        body = re.sub(rf"^({re.escape(head)}[^\n]*\n\n)(?!{re.escape(RANK_NOTE)}|{re.escape(STATED)})",
                      lambda m: m.group(1) + RANK_NOTE + "\n\n", body, count=1, flags=re.M)
    return body


def rewrite_report(report_md: str, short: list[str], table: list[str], ties: list[str] = (),
                   best: pd.DataFrame | None = None, conversions: dict[str, str] | None = None,
                   tracks_long: pd.DataFrame | None = None) -> str:
    """The report with its "In short" section replaced by ``short`` + the claim table, a table of contents
    before it, :data:`RANK_NOTE` under the sections that rank by the lowest mean, given ``best`` and
    ``conversions`` ("protocol", "tight") the tie sets in their tables (:func:`.tie_columns.with_tie_columns`)
    and given ``tracks_long`` the tracks' tie table (:func:`.tuning_tracks.with_track_ties`)."""
    body = re.sub(rf"^({re.escape(TOC_HEADING)}|{re.escape(TIES_HEADING)})\n.*?(?=^## )", "", report_md,
                  flags=re.S | re.M)
    block = "\n".join(short + ["One line per claim (the verdict over its datasets and one number; details: "
                               "*Verdicts with numbers*):", "", *table, "", *ties])
    body = re.sub(rf"^{re.escape(HEADING)}\n.*?(?=^## )", lambda _: block + "\n", body, count=1, flags=re.S | re.M)
    body = _note_rankings(body)
    if best is not None and conversions:
        body = with_tie_columns(body, best, conversions)
    if tracks_long is not None:
        body = with_track_ties(body, tracks_long)
    first = body.index(HEADING)
    return body[:first] + "\n".join(contents(body)) + "\n" + body[first:]


def republish(bundle: Path, report: Path, readme: Path | None, config: Path, conversion="bs16", tight="gdp") -> None:
    """Rewrite ``report``'s summary, the summary figure beside it and ``readme``'s copies from ``bundle``."""
    read = lambda name: read_csv(bundle / name) if (bundle / name).exists() else pd.DataFrame()  # noqa: E731
    verdicts, best, floor = read("claims.csv"), read("best_T.csv"), read("floor.csv")
    tracks = pd.concat([read("private_selection.csv"), read("fixed_rule.csv")], ignore_index=True)
    tracks_cfg = (yaml.safe_load(config.read_text()) or {}).get("tracks") or {}
    short = in_short(verdicts, best, floor, tracks, tracks_cfg, read("resources.csv"), conversion, tight)
    table = claim_table(claim_rows(verdicts, best, conversion))
    heatmap(config_ties(best, conversion), report.parent / FIGURE, conversion)
    long = track_table(tracks, best, tracks_cfg, conversion) if len(tracks) else None
    atomic_write_text(report, rewrite_report(report.read_text(), short, table, tie_section(best, conversion), best,
                                             {"protocol": conversion, "tight": tight}, long))
    if readme is not None:
        sync_readme(readme, report)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="Republish the claims report's summary from the committed bundle.")
    p.add_argument("--bundle", type=Path, default=Path("figures/claims"))
    p.add_argument("--report", type=Path, default=Path("figures/claims.md"))
    p.add_argument("--readme", type=Path, default=Path("README.md"))
    p.add_argument("--config", type=Path, default=Path("config/claims.yaml"))
    a = p.parse_args(argv)
    republish(a.bundle, a.report, a.readme, a.config)


if __name__ == "__main__":
    main()
