"""Figures of the paper (1-4), the conversion study (5), the compute-budget frontier (6 by gradient passes,
8 by runtime) and, with a holdout, the held-out metrics (7), from the aggregate tables.

Every figure is one file per format (PNG and PDF) with one panel per dataset (or dataset x
epsilon). Axis labels and titles state that T was selected non-privately. A configuration has one colour,
line style, marker and legend label in every figure (:mod:`.styles`). Legends and notes sit below the
panels, never over the data.
"""

from __future__ import annotations

import math
import shutil
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from ..io import atomic_path  # noqa: E402
from .frontier import to_long  # noqa: E402
from .styles import LINES, curve_style, in_style_order, label, method_styles, styles_for  # noqa: E402,F401
from .timing import cost_lookup, runtime_column  # noqa: E402

NONPRIVATE = "best T per algorithm chosen non-privately"


#: legend label of the floor line (dpnewton.floor.LABEL)
FLOOR_LABEL = "Gaussian ridge floor (local quadratic model), not a lower bound"
TRIVIAL_LABEL = "trivial w=0 (ln 2 - loss*)"
OPTIMUM_LABEL = "non-private optimum w* (training split)"
TRIVIAL_LOG_LOSS_LABEL = "trivial w=0 (ln 2)"
#: the reference lines, listed after the methods in a legend
REFERENCES = (TRIVIAL_LABEL, FLOOR_LABEL, OPTIMUM_LABEL, TRIVIAL_LOG_LOSS_LABEL)

#: legend and note text size (points)
SMALL = 8


def _style():
    plt.style.use("seaborn-v0_8-whitegrid")


def _grid(n: int, ncols: int = 3, size=(4.2, 3.3)):
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


#: file metadata left out, and SVG ids salted with a constant, so that the same tables give the same bytes
UNDATED = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}


def save(fig, paths) -> None:
    for p in paths:
        p = Path(p)
        fmt = p.suffix.lstrip(".")
        with atomic_path(p, suffix=p.suffix) as tmp, plt.rc_context({"svg.hashsalt": "dpnewton"}):
            fig.savefig(tmp, format=fmt, bbox_inches="tight", dpi=150, metadata=UNDATED.get(fmt))
    plt.close(fig)


def _empty(ax, text="no data"):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)


def _positive(y):
    y = np.asarray(y, dtype=float)
    return np.where(y > 0, y, np.nan)


def _band(ax, x, mean, se, **kw):
    line, = ax.plot(x, mean, **kw)
    lo = np.asarray(mean, dtype=float) - np.asarray(se, dtype=float)
    hi = np.asarray(mean, dtype=float) + np.asarray(se, dtype=float)
    ax.fill_between(x, _positive(lo), _positive(hi), alpha=0.2, color=line.get_color(), linewidth=0)
    return line


def _series(d: pd.DataFrame, column: str, values, x: str):
    """(value, its rows sorted by ``x``) for each of ``values`` that has rows in ``d[column]``, in order."""
    for v in values:
        a = d[d[column] == v].sort_values(x)
        if len(a):
            yield v, a


#: a mean excess loss above this multiple of the trivial output's (w = 0) is a diverged cell: left out of the
#: y-range and marked at the panel's top edge (a hollow marker), named in the notes below the legend
DIVERGED = 10.0


def _diverged(y, trivial: float | None) -> np.ndarray:
    """Which of ``y`` lie above :data:`DIVERGED` x ``trivial`` (none without a trivial value)."""
    y = np.asarray(y, dtype=float)
    if trivial is None or not np.isfinite(trivial) or trivial <= 0:
        return np.zeros(y.shape, dtype=bool)
    return np.isfinite(y) & (y > DIVERGED * trivial)


def _mark_above(ax, x, style: dict) -> None:
    """Hollow markers at the top edge of ``ax`` at the x positions of cells above the y-range."""
    ax.plot(np.asarray(x, dtype=float), np.full(len(x), 0.97), transform=ax.get_xaxis_transform(), ls="none",
            marker=style.get("marker") or "^", mfc="none", mec=style["color"], ms=6, clip_on=False)


def _trivial(baseline: pd.DataFrame | None, ds: str) -> float | None:
    if baseline is None or "dataset" not in baseline:
        return None
    triv = baseline.loc[baseline["dataset"] == ds, "trivial_excess_loss"]
    return float(triv.iloc[0]) if len(triv) else None


def privacy_utility(best: pd.DataFrame, baseline: pd.DataFrame, algorithms, conversion: str, paths,
                    title: str = "Privacy-utility trade-off", floor: pd.DataFrame | None = None,
                    styles: dict | None = None, extra: dict | None = None) -> None:
    """Figure 2 (and 4): best-T mean excess loss vs epsilon, log-log, +-1 s.e. bands, trivial line;
    with ``floor`` (the floor table) also the Gaussian ridge floor F*(epsilon) of each dataset as a
    dotted line, labelled as what it is: a reference on the local quadratic model, not a lower bound.
    ``extra`` (dataset -> configurations) adds configurations to a dataset's panel. A cell above
    :data:`DIVERGED` x the trivial excess loss is marked at the top edge instead of stretching the y-axis.
    Below the legend, per dataset, configuration and epsilon, the share of its runs that were unstable."""
    _style()
    extra = extra or {}
    shown = list(algorithms) + [a for names in extra.values() for a in names]
    b = best[(best["conversion"] == conversion) & best["algorithm"].isin(shown)]
    styles = styles_for(styles, shown)
    datasets = sorted(best["dataset"].unique())
    fig, axes = _grid(len(datasets))
    notes, above = [], []
    for ax, ds in zip(axes, datasets):
        d = b[b["dataset"] == ds]
        trivial = _trivial(baseline, ds)
        unstable = []
        for alg, a in _series(d, "algorithm", in_style_order(list(algorithms) + extra.get(ds, []), styles),
                              "epsilon"):
            y = _positive(a["excess_loss_mean"])
            out = _diverged(y, trivial)
            _band(ax, a["epsilon"], np.where(out, np.nan, y), a["excess_loss_se"], ms=3.5, **styles[alg])
            if out.any():
                _mark_above(ax, a["epsilon"][out], styles[alg])
                above.append(f"{ds}: {styles[alg]['label']} at eps=" + ", ".join(f"{e:g}" for e in a["epsilon"][out]))
            note = _instability(a)
            if note:
                unstable.append(f"{styles[alg]['label']} {note}")
        if unstable:
            notes.append(f"{ds}: " + "; ".join(unstable))
        if trivial is not None:
            ax.axhline(trivial, color="k", ls="--", lw=1, label=TRIVIAL_LABEL)
        if floor is not None:
            f = floor[(floor["dataset"] == ds) & (floor["conversion"] == conversion)].sort_values("epsilon")
            if len(f):
                ax.plot(f["epsilon"], _positive(f["ridge_floor"]), color="0.45", ls=":", lw=1.4,
                        label=FLOOR_LABEL)
        if d.empty:
            _empty(ax)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(ds)
        ax.set_xlabel(r"privacy budget $\varepsilon$ ($\delta=n^{-2}$)")
        ax.set_ylabel("excess loss at best T (mean, +-1 s.e.)")
    if notes:
        notes.insert(0, "Share of runs (every T) that diverged or ended no better than w=0, per epsilon:")
    if above:
        notes.append(f"Hollow markers at the top edge: mean excess loss above {DIVERGED:g} x the trivial w=0's "
                     "(diverged), off the y-range: " + "; ".join(above))
    _finish(fig, axes, f"{title} ({NONPRIVATE}; conversion {conversion})", styles, notes)
    save(fig, paths)


def _instability(a: pd.DataFrame) -> str:
    """The diverged/worse-than-trivial share of this configuration's runs at each epsilon where it is not
    zero (and the share of iterations where the explosion reset fired), e.g. "50% at eps=0.1"."""
    if "unstable_fraction" not in a:
        return ""
    parts = [f"{float(u):.0%} at eps={float(e):g}" for e, u in zip(a["epsilon"], a["unstable_fraction"]) if u > 0]
    if "reset_iteration_fraction" in a:
        parts += [f"reset in {float(r):.0%} of iterations at eps={float(e):g}"
                  for e, r in zip(a["epsilon"], a["reset_iteration_fraction"]) if r > 0]
    return ", ".join(parts)


def runtime_curves(curves: pd.DataFrame, costs: pd.DataFrame, algorithms, epsilon: float, conversion: str,
                   paths, styles: dict | None = None) -> None:
    """Figure 1: excess loss vs runtime, best-T runs, mean over seeds; each panel's best T below the legend.

    The runtime at iterate k is that of a lone run of k updates (``costs``, the timing stage:
    :mod:`dpnewton.pipeline.timing`); a configuration that was not timed is left out.
    """
    _style()
    c = curves[(curves["conversion"] == conversion) & np.isclose(curves["epsilon"], epsilon)
               & curves["algorithm"].isin(algorithms)]
    c = c.assign(runtime_s=runtime_column(c, cost_lookup(costs), "iterate"))
    c = c[np.isfinite(c["runtime_s"].to_numpy())]
    styles = styles_for(styles, algorithms)
    datasets = sorted(curves["dataset"].unique()) or ["(none)"]
    fig, axes = _grid(len(datasets))
    notes = []
    for ax, ds in zip(axes, datasets):
        d = c[c["dataset"] == ds]
        best_T = []
        for alg, a in _series(d, "algorithm", in_style_order(algorithms, styles), "iterate"):
            _band(ax, a["runtime_s"], _positive(a["excess_loss_mean"]), a["excess_loss_se"], **curve_style(styles[alg]))
            best_T.append(f"{styles[alg]['label']} {int(a['iterations'].iloc[0])}")
        if best_T:
            notes.append(f"{ds}: " + ", ".join(best_T))
        if d.empty:
            _empty(ax)
        ax.set_yscale("log")
        ax.set_title(f"{ds}, eps={epsilon:g}")
        ax.set_xlabel("runtime (s) of a lone run, from timed per-update costs")
        ax.set_ylabel("excess loss (mean, +-1 s.e.)")
    _finish(fig, axes, f"Excess loss vs runtime at eps={epsilon:g} ({NONPRIVATE})", styles,
            ["Best T:"] + notes if notes else [])
    save(fig, paths)


def convergence(curves: pd.DataFrame, algorithms, epsilons, conversion: str, paths,
                styles: dict | None = None) -> None:
    """Figure 3: excess loss vs iteration at a low and a high epsilon, best-T runs; each panel's best T
    below the legend. The iteration axis is logarithmic (linear between iterates 0 and 1, so w_0 stays
    on it): the Newton runs' best T is tens of iterations, the Oracle's thousands."""
    _style()
    styles = styles_for(styles, algorithms)
    datasets = sorted(curves["dataset"].unique()) or ["(none)"]
    eps = list(epsilons)
    fig, axes = plt.subplots(len(datasets), len(eps), figsize=(4.2 * len(eps), 3.3 * len(datasets)),
                             squeeze=False)
    notes = []
    for i, ds in enumerate(datasets):
        for j, e in enumerate(eps):
            ax = axes[i][j]
            d = curves[(curves["dataset"] == ds) & (curves["conversion"] == conversion)
                       & np.isclose(curves["epsilon"], e)]
            best_T = []
            for alg, a in _series(d, "algorithm", in_style_order(algorithms, styles), "iterate"):
                _band(ax, a["iterate"], _positive(a["excess_loss_mean"]), a["excess_loss_se"],
                      **curve_style(styles[alg]))
                best_T.append(f"{styles[alg]['label']} {int(a['iterations'].iloc[0])}")
            if best_T:
                notes.append(f"{ds}, eps={e:g}: " + ", ".join(best_T))
            if d.empty:
                _empty(ax)
            ax.set_yscale("log")
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlim(left=0.0)
            ax.set_title(f"{ds}, eps={e:g}")
            ax.set_xlabel("iteration (log scale)")
            ax.set_ylabel("excess loss (mean, +-1 s.e.)")
    _finish(fig, list(axes.flat), f"Convergence: DP-GD-Oracle vs ours ({NONPRIVATE})", styles,
            ["Best T:"] + notes if notes else [])
    save(fig, paths)


def conversions(best: pd.DataFrame, algorithm: str, conversions_list, paths,
                baseline: pd.DataFrame | None = None) -> None:
    """Figure 5: one algorithm's best-T excess loss vs epsilon under each eps->rho conversion."""
    _style()
    b = best[best["algorithm"] == algorithm]
    datasets = sorted(b["dataset"].unique()) or ["(none)"]
    fig, axes = _grid(len(datasets))
    for ax, ds in zip(axes, datasets):
        d = b[b["dataset"] == ds]
        for conv, a in _series(d, "conversion", conversions_list, "epsilon"):
            _band(ax, a["epsilon"], _positive(a["excess_loss_mean"]), a["excess_loss_se"], marker="o",
                  ms=3, label=conv)
        if baseline is not None:
            triv = baseline.loc[baseline["dataset"] == ds, "trivial_excess_loss"]
            if len(triv):
                ax.axhline(float(triv.iloc[0]), color="k", ls="--", lw=1, label=TRIVIAL_LABEL)
        if d.empty:
            _empty(ax)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{ds}: {label(algorithm)}")
        ax.set_xlabel(r"target $\varepsilon$ ($\delta=n^{-2}$)")
        ax.set_ylabel("excess loss at best T (mean, +-1 s.e.)")
    _finish(fig, axes, f"epsilon -> rho conversions ({NONPRIVATE})")
    save(fig, paths)


def heldout(table: pd.DataFrame, algorithms, conversion: str, paths, styles: dict | None = None,
            groups=None) -> None:
    """Figure 7: test accuracy and test log-loss (log y: diverging runs reach losses far above ln 2)
    at best T vs epsilon (log x), +-1 s.e. bands; one column per dataset; the non-private optimum of
    the training split (and, for the log-loss, the trivial w = 0) as reference lines. Best T was
    selected on the training excess loss. ``groups`` ([(title, configurations)], default one group of
    ``algorithms``): a pair of rows (accuracy, log-loss) per group."""
    _style()
    t = table[(table["conversion"] == conversion) & table["algorithm"].isin(algorithms)]
    styles = styles_for(styles, algorithms)
    datasets = sorted(table["dataset"].unique()) or ["(none)"]
    groups = [(g, m) for g, m in (groups or [("", list(algorithms))]) if m]
    fig, grid = plt.subplots(2 * len(groups), len(datasets), figsize=(4.2 * len(datasets), 3.3 * 2 * len(groups)),
                             squeeze=False)
    panels = [(group, members, metric, ylabel) for group, members in groups
              for metric, ylabel in (("test_accuracy", "test accuracy at best T (mean, +-1 s.e.)"),
                                     ("test_log_loss", "test log-loss at best T (mean, +-1 s.e.)"))]
    for j, ds in enumerate(datasets):
        d = t[t["dataset"] == ds]
        ref = table[table["dataset"] == ds]
        for i, (group, members, metric, ylabel) in enumerate(panels):
            ax = grid[i][j]
            for alg, a in _series(d, "algorithm", in_style_order(members, styles), "epsilon"):
                _band(ax, a["epsilon"], a[f"{metric}_mean"], a[f"{metric}_se"], ms=3.5, **styles[alg])
            if len(ref):
                ax.axhline(float(ref[f"optimum_{metric}"].iloc[0]), color="k", ls="--", lw=1,
                           label=OPTIMUM_LABEL)
            if metric == "test_log_loss":
                ax.axhline(math.log(2.0), color="grey", ls=":", lw=1, label=TRIVIAL_LOG_LOSS_LABEL)
                ax.set_yscale("log")
            if d.empty:
                _empty(ax)
            ax.set_xscale("log")
            n_test = f", {int(ref['n_test'].iloc[0])} test rows" if len(ref) else ""
            ax.set_title(f"{ds}{n_test}" + (f": {group}" if group else ""), fontsize=10)
            ax.set_xlabel(r"privacy budget $\varepsilon$ ($\delta=n_{train}^{-2}$)")
            ax.set_ylabel(ylabel)
    _finish(fig, list(grid.flat),
            f"Held-out test metrics ({NONPRIVATE} on the training excess loss; conversion {conversion})", styles)
    save(fig, paths)


#: Figure 6's and 8's cost measures: column prefix of the frontier table -> x-axis label, title
FRONTIER_MEASURES = {"passes": ("budget: gradient passes over Z (pass-equivalents)", "gradient passes"),
                     "runtime_s": ("budget: lone-run runtime (s), timing stage", "lone-run runtime")}


def frontier_figure(table: pd.DataFrame, baseline: pd.DataFrame, conversion: str, paths, measure: str = "passes",
                    floor: pd.DataFrame | None = None, styles: dict | None = None, groups=None) -> None:
    """Figure 6 (``measure`` "passes") or 8 ("runtime_s"): the compute-budget frontier
    (:mod:`dpnewton.pipeline.frontier`) under one cost measure, log-log: best mean excess loss within a
    budget vs the budget, a step line (best so far) per method; one row per dataset and group of methods
    (``groups``: [(title, methods)], default one group of all), one column per epsilon; the trivial w = 0 and
    the Gaussian ridge floor F* as horizontal reference lines (the non-private optimum, excess 0, is off the
    log scale). A frontier above :data:`DIVERGED` x the trivial excess loss is left out of the y-range: cut
    there and marked at the top edge, named in the notes."""
    _style()
    xlabel, what = FRONTIER_MEASURES[measure]
    long = to_long(table)
    long = long[(long["conversion"] == conversion) & (long["measure"] == measure)]
    datasets = sorted(long["dataset"].unique()) or ["(none)"]
    eps = sorted(long["epsilon"].unique()) or [float("nan")]
    styles = styles_for(styles, sorted(long["method"].unique()))
    groups = [(t, m) for t, m in (groups or [("", sorted(long["method"].unique()))]) if m]
    drawable = long[np.isfinite(long["best_excess_loss"].to_numpy(dtype=float))]
    rows = [(ds, t, m) for ds in datasets for t, m in groups
            if drawable[(drawable["dataset"] == ds) & drawable["method"].isin(m)].size]
    missing = [f"{t or 'methods'} ({ds})" for ds in datasets for t, m in groups if (ds, t, m) not in rows]
    rows = rows or [(ds, "", []) for ds in datasets]
    fig, grid = plt.subplots(len(rows), len(eps), figsize=(4.2 * len(eps), 3.3 * len(rows)), squeeze=False)
    above = []
    for i, (ds, group, members) in enumerate(rows):
        trivial = _trivial(baseline, ds)
        for j, e in enumerate(eps):
            ax = grid[i][j]
            d = long[(long["dataset"] == ds) & np.isclose(long["epsilon"], e)]
            drawn = False
            for method in in_style_order([m for m in d["method"].unique() if m in members], styles):
                a = d[d["method"] == method].sort_values("budget")
                y = _positive(a["best_excess_loss"])
                if not np.isfinite(y).any():
                    continue
                out = _diverged(y, trivial)
                ax.step(a["budget"], np.where(out, np.nan, y), where="post", lw=1.3, **curve_style(styles[method]))
                if out.any():
                    _mark_above(ax, a["budget"].to_numpy()[out][:1], styles[method])
                    above.append(f"{styles[method]['label']} ({ds}, eps={e:g})")
                drawn = True
            if trivial is not None:
                ax.axhline(trivial, color="k", ls="--", lw=1, label=TRIVIAL_LABEL)
            if floor is not None and len(floor):
                f = floor[(floor["dataset"] == ds) & (floor["conversion"] == conversion)
                          & np.isclose(floor["epsilon"], e)]
                if len(f) and float(f["ridge_floor"].iloc[0]) > 0:
                    ax.axhline(float(f["ridge_floor"].iloc[0]), color="0.45", ls=":", lw=1.4, label=FLOOR_LABEL)
            if not drawn:
                _empty(ax, "no method costed" if measure == "runtime_s" else "no data")
            else:
                ax.set_xscale("log")
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_yscale("log")
            ax.set_title(f"{ds}, eps={e:g}" + (f": {group}" if group else ""), fontsize=10)
            if i == len(rows) - 1:
                ax.set_xlabel(xlabel, fontsize=SMALL)
            if j == 0:
                ax.set_ylabel("best excess loss within budget", fontsize=SMALL)
    notes = ([f"Hollow marker at the top edge: the frontier is above {DIVERGED:g} x the trivial w=0's excess loss "
              "(diverged) at the smallest budgets, cut there: " + "; ".join(above)] if above else [])
    if missing:
        notes.append("No row (no method of the group " + ("timed" if measure == "runtime_s" else "with a result")
                     + "): " + "; ".join(missing))
    _finish(fig, list(grid.flat), f"Compute-budget frontier by {what} (best T and configuration chosen "
            f"non-privately; conversion {conversion})", styles, notes)
    save(fig, paths)


def _legend_columns(labels: list[str], width_in: float) -> int:
    """The most legend columns (filled column by column) whose widths fit in ``width_in``."""
    def col_in(col):
        return (max(len(t) for t in col) * SMALL * 0.55 + 36) / 72
    for ncol in range(min(len(labels), 6), 1, -1):
        rows = math.ceil(len(labels) / ncol)
        cols = [labels[k:k + rows] for k in range(0, len(labels), rows)]
        if sum(col_in(c) for c in cols) <= 0.96 * width_in:
            return ncol
    return 1


def _finish(fig, axes, title: str, styles: dict | None = None, notes=()) -> None:
    """The figure's frame: the title above the panels; below them one shared legend (methods in
    :func:`method_styles` order, then other series, then the reference lines, :data:`REFERENCES`) and under
    it ``notes`` (lines of text, wrapped to the figure's width); the figure grows by the room they take."""
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    order = {s["label"]: k for k, s in enumerate((styles or {}).values())}
    labels_ = sorted(handles, key=lambda lab: (lab in REFERENCES, order.get(lab, len(order))))
    width = fig.get_figwidth()
    ncol = _legend_columns(labels_, width) if labels_ else 1
    lines = [w for note in notes for w in textwrap.wrap(note, int(width * 72 / (7 * 0.52)),
                                                        subsequent_indent="    ")]
    title_in = 0.45
    legend_in = 0.19 * math.ceil(len(labels_) / ncol) + 0.25 if labels_ else 0.0
    notes_in = 0.13 * len(lines) + 0.1 if lines else 0.0
    height = fig.get_figheight() + title_in + legend_in + notes_in
    fig.set_figheight(height)
    fig.tight_layout(rect=(0, (legend_in + notes_in) / height, 1, 1 - title_in / height))
    fig.suptitle(title, y=1 - 0.08 / height, va="top")
    if labels_:
        fig.legend([handles[k] for k in labels_], labels_, loc="upper center", ncol=ncol, fontsize=SMALL,
                   bbox_to_anchor=(0.5, (legend_in + notes_in) / height), frameon=False)
    if lines:
        fig.text(0.01, notes_in / height, "\n".join(lines), va="top", ha="left", fontsize=7, color="0.25")


def publish(sources, targets) -> None:
    """Copy each source figure onto its target path atomically."""
    for src, dst in zip(sources, targets):
        with atomic_path(dst, suffix=Path(dst).suffix) as tmp:
            shutil.copyfile(src, tmp)
