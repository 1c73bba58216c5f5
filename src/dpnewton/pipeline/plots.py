"""Figures of the paper (1-4), the conversion study (5), the compute-budget frontier (6) and, with a
holdout, the held-out metrics (7), from the aggregate tables.

Every figure is one file per format (PNG and PDF) with one panel per dataset (or dataset x
epsilon). Axis labels and titles state that T was selected non-privately. A method has one colour
and line style in every figure of a run (:func:`method_styles` in the order of
:func:`dpnewton.pipeline.figures.style_order`).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from ..io import atomic_path  # noqa: E402
from ..algorithms import ALGORITHMS  # noqa: E402
from .frontier import to_long  # noqa: E402
from .timing import cost_lookup, runtime_column  # noqa: E402

NONPRIVATE = "best T per algorithm chosen non-privately"


#: legend label of the floor line (dpnewton.floor.LABEL)
FLOOR_LABEL = "Gaussian ridge floor (local quadratic model), not a lower bound"


def label(name: str) -> str:
    """A registered algorithm's card label; a configuration name (or anything else) as it is."""
    return ALGORITHMS[name].label if name in ALGORITHMS else name


#: line styles of the methods, in turn per ten colours; "--" marks a non-private step (Figure 6) and ":"
#: the floor, so neither is used here
METHOD_LINES = ("-", "-.")


def method_styles(methods) -> dict[str, dict]:
    """Colour and line style of each method, the same in every figure of a run: the k-th method of
    ``methods`` (:func:`~dpnewton.pipeline.figures.style_order`) gets tab10 colour k mod 10 and line style
    ``METHOD_LINES[k // 10]`` (cycling), so up to 20 methods stay apart."""
    colours = plt.get_cmap("tab10").colors
    return {m: {"color": colours[k % len(colours)], "ls": METHOD_LINES[(k // len(colours)) % len(METHOD_LINES)]}
            for k, m in enumerate(dict.fromkeys(methods))}


def _styles_for(styles: dict | None, names) -> dict[str, dict]:
    """``styles`` extended by any of ``names`` it lacks (a caller without the config's list)."""
    styles = dict(styles or {})
    extra = [n for n in dict.fromkeys(names) if n not in styles]
    if extra:
        styles.update(method_styles(list(styles) + extra))
    return styles


def _style():
    plt.style.use("seaborn-v0_8-darkgrid")


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


def privacy_utility(best: pd.DataFrame, baseline: pd.DataFrame, algorithms, conversion: str, paths,
                    title: str = "Privacy-utility trade-off", floor: pd.DataFrame | None = None,
                    styles: dict | None = None) -> None:
    """Figure 2 (and 4): best-T mean excess loss vs epsilon, log-log, +-1 s.e. bands, trivial line;
    with ``floor`` (the floor table) also the Gaussian ridge floor F*(epsilon) of each dataset as a
    dashed line, labelled as what it is: a reference on the local quadratic model, not a lower bound."""
    _style()
    b = best[(best["conversion"] == conversion) & best["algorithm"].isin(algorithms)]
    styles = _styles_for(styles, algorithms)
    datasets = sorted(best["dataset"].unique())
    fig, axes = _grid(len(datasets))
    for ax, ds in zip(axes, datasets):
        d = b[b["dataset"] == ds]
        notes = []
        for alg, a in _series(d, "algorithm", algorithms, "epsilon"):
            _band(ax, a["epsilon"], _positive(a["excess_loss_mean"]), a["excess_loss_se"], marker="o",
                  ms=3, label=label(alg), **styles[alg])
            note = _instability(a)
            if note:
                notes.append(f"{label(alg)} {note}")
        triv = baseline.loc[baseline["dataset"] == ds, "trivial_excess_loss"]
        if len(triv):
            ax.axhline(float(triv.iloc[0]), color="k", ls="--", lw=1, label="trivial w=0 (ln 2 - loss*)")
        if floor is not None:
            f = floor[(floor["dataset"] == ds) & (floor["conversion"] == conversion)].sort_values("epsilon")
            if len(f):
                ax.plot(f["epsilon"], _positive(f["ridge_floor"]), color="0.45", ls="--", lw=1.2,
                        label=FLOOR_LABEL)
        if notes:
            ax.text(0.02, 0.02, "runs diverged or worse than w=0 (max over eps):\n" + "\n".join(notes),
                    transform=ax.transAxes, fontsize=5.5, va="bottom", ha="left", alpha=0.8)
        if d.empty:
            _empty(ax)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(ds)
        ax.set_xlabel(r"privacy budget $\varepsilon$ ($\delta=n^{-2}$)")
        ax.set_ylabel("excess loss at best T (mean, +-1 s.e.)")
    _legend(fig, axes)
    fig.suptitle(f"{title} ({NONPRIVATE}; conversion {conversion})")
    save(fig, paths)


def _instability(a: pd.DataFrame) -> str:
    """Legend-free note of the worst diverged/worse-than-trivial share over this algorithm's cells."""
    if "unstable_fraction" not in a:
        return ""
    worst = a["unstable_fraction"].astype(float).max()
    resets = a["reset_iteration_fraction"].astype(float).max() if "reset_iteration_fraction" in a else 0.0
    parts = []
    if worst > 0:
        parts.append(f"{worst:.0%}")
    if resets > 0:
        parts.append(f"reset in {resets:.0%} of iterations")
    return ", ".join(parts)


def runtime_curves(curves: pd.DataFrame, costs: pd.DataFrame, algorithms, epsilon: float, conversion: str,
                   paths, styles: dict | None = None) -> None:
    """Figure 1: excess loss vs runtime, best-T runs, mean over seeds.

    The runtime at iterate k is that of a lone run of k updates (``costs``, the timing stage:
    :mod:`dpnewton.pipeline.timing`); a configuration that was not timed is left out.
    """
    _style()
    c = curves[(curves["conversion"] == conversion) & np.isclose(curves["epsilon"], epsilon)
               & curves["algorithm"].isin(algorithms)]
    c = c.assign(runtime_s=runtime_column(c, cost_lookup(costs), "iterate"))
    c = c[np.isfinite(c["runtime_s"].to_numpy())]
    styles = _styles_for(styles, algorithms)
    datasets = sorted(curves["dataset"].unique()) or ["(none)"]
    fig, axes = _grid(len(datasets))
    for ax, ds in zip(axes, datasets):
        d = c[c["dataset"] == ds]
        for alg, a in _series(d, "algorithm", algorithms, "iterate"):
            y = _positive(a["excess_loss_mean"])
            _band(ax, a["runtime_s"], y, a["excess_loss_se"], label=label(alg), **styles[alg])
            # best T differs per panel: mark it at the curve's end (the legend is shared)
            ax.annotate(f"T={int(a['iterations'].iloc[0])}", (a["runtime_s"].iloc[-1], y[-1]),
                        fontsize=7, xytext=(3, 0), textcoords="offset points", va="center")
        if d.empty:
            _empty(ax)
        ax.set_yscale("log")
        ax.set_title(f"{ds}, eps={epsilon:g}")
        ax.set_xlabel("runtime (s) of a lone run, from timed per-update costs")
        ax.set_ylabel("excess loss (mean, +-1 s.e.)")
    _legend(fig, axes)
    fig.suptitle(f"Excess loss vs runtime at eps={epsilon:g} ({NONPRIVATE})")
    save(fig, paths)


def convergence(curves: pd.DataFrame, algorithms, epsilons, conversion: str, paths,
                styles: dict | None = None) -> None:
    """Figure 3: excess loss vs iteration at a low and a high epsilon, best-T runs. The iteration axis is
    logarithmic (linear between iterates 0 and 1, so w_0 stays on it): the Newton runs' best T is tens
    of iterations, the Oracle's thousands."""
    _style()
    styles = _styles_for(styles, algorithms)
    datasets = sorted(curves["dataset"].unique()) or ["(none)"]
    eps = list(epsilons)
    fig, axes = plt.subplots(len(datasets), len(eps), figsize=(4.2 * len(eps), 3.3 * len(datasets)),
                             squeeze=False)
    for i, ds in enumerate(datasets):
        for j, e in enumerate(eps):
            ax = axes[i][j]
            d = curves[(curves["dataset"] == ds) & (curves["conversion"] == conversion)
                       & np.isclose(curves["epsilon"], e)]
            for alg, a in _series(d, "algorithm", algorithms, "iterate"):
                _band(ax, a["iterate"], _positive(a["excess_loss_mean"]), a["excess_loss_se"],
                      label=f"{label(alg)} (T={int(a['iterations'].iloc[0])})", **styles[alg])
            if d.empty:
                _empty(ax)
            ax.set_yscale("log")
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlim(left=0.0)
            ax.set_title(f"{ds}, eps={e:g}")
            ax.set_xlabel("iteration (log scale)")
            ax.set_ylabel("excess loss (mean, +-1 s.e.)")
            ax.legend(fontsize=7)
    fig.suptitle(f"Convergence: DP-GD-Oracle vs ours ({NONPRIVATE})")
    fig.tight_layout(rect=(0, 0, 1, 1 - min(0.2, 0.45 / fig.get_figheight())))
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
                ax.axhline(float(triv.iloc[0]), color="k", ls="--", lw=1, label="trivial w=0 (ln 2 - loss*)")
        if d.empty:
            _empty(ax)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{ds}: {label(algorithm)}")
        ax.set_xlabel(r"target $\varepsilon$ ($\delta=n^{-2}$)")
        ax.set_ylabel("excess loss at best T (mean, +-1 s.e.)")
    _legend(fig, axes)
    fig.suptitle(f"epsilon -> rho conversions ({NONPRIVATE})")
    save(fig, paths)


def heldout(table: pd.DataFrame, algorithms, conversion: str, paths, styles: dict | None = None) -> None:
    """Figure 7: test accuracy and test log-loss (log y: diverging runs reach losses far above ln 2)
    at best T vs epsilon (log x), +-1 s.e. bands; one column per dataset; the non-private optimum of
    the training split (and, for the log-loss, the trivial w = 0) as reference lines. Best T was
    selected on the training excess loss."""
    _style()
    t = table[(table["conversion"] == conversion) & table["algorithm"].isin(algorithms)]
    styles = _styles_for(styles, algorithms)
    datasets = sorted(table["dataset"].unique()) or ["(none)"]
    fig, grid = plt.subplots(2, len(datasets), figsize=(4.2 * len(datasets), 3.3 * 2), squeeze=False)
    panels = [("test_accuracy", "test accuracy at best T (mean, +-1 s.e.)"),
              ("test_log_loss", "test log-loss at best T (mean, +-1 s.e.)")]
    for j, ds in enumerate(datasets):
        d = t[t["dataset"] == ds]
        ref = table[table["dataset"] == ds]
        for i, (metric, ylabel) in enumerate(panels):
            ax = grid[i][j]
            for alg, a in _series(d, "algorithm", algorithms, "epsilon"):
                _band(ax, a["epsilon"], a[f"{metric}_mean"], a[f"{metric}_se"], marker="o", ms=3,
                      label=label(alg), **styles[alg])
            if len(ref):
                ax.axhline(float(ref[f"optimum_{metric}"].iloc[0]), color="k", ls="--", lw=1,
                           label="non-private optimum w* (training split)")
            if metric == "test_log_loss":
                ax.axhline(math.log(2.0), color="grey", ls=":", lw=1, label="trivial w=0 (ln 2)")
                ax.set_yscale("log")
            if d.empty:
                _empty(ax)
            ax.set_xscale("log")
            n_test = f", {int(ref['n_test'].iloc[0])} test rows" if len(ref) else ""
            ax.set_title(f"{ds}{n_test}")
            ax.set_xlabel(r"privacy budget $\varepsilon$ ($\delta=n_{train}^{-2}$)")
            ax.set_ylabel(ylabel)
    axes = list(grid.flat)
    _legend(fig, axes)
    fig.suptitle(f"Held-out test metrics ({NONPRIVATE} on the training excess loss; conversion {conversion})")
    save(fig, paths)


def frontier_figure(table: pd.DataFrame, baseline: pd.DataFrame, conversion: str, paths,
                    floor: pd.DataFrame | None = None, styles: dict | None = None) -> None:
    """Figure 6: the compute-budget frontier (:mod:`dpnewton.pipeline.frontier`), log-log: best mean
    excess loss within a budget vs the budget, a step line (best so far) per method, one panel per
    (dataset, epsilon) for each cost measure (rows: dataset x {gradient passes, lone-run runtime});
    the trivial w = 0 and the Gaussian ridge floor F* as horizontal reference lines (the
    non-private optimum, excess 0, is off the log scale). Methods with a non-private step are dashed."""
    _style()
    long = to_long(table)
    long = long[long["conversion"] == conversion]
    datasets = sorted(long["dataset"].unique()) or ["(none)"]
    eps = sorted(long["epsilon"].unique()) or [float("nan")]
    measures = [("passes", "budget: gradient passes over Z (pass-equivalents)"),
                ("runtime_s", "budget: lone-run runtime (s), timing stage")]
    nrows = len(datasets) * len(measures)
    styles = _styles_for(styles, sorted(long["method"].unique()))
    fig, grid = plt.subplots(nrows, len(eps), figsize=(4.2 * len(eps), 3.3 * nrows), squeeze=False)
    for i, ds in enumerate(datasets):
        triv = baseline.loc[baseline["dataset"] == ds, "trivial_excess_loss"] if "dataset" in baseline else []
        for j_m, (measure, xlabel) in enumerate(measures):
            for j, e in enumerate(eps):
                ax = grid[i * len(measures) + j_m][j]
                d = long[(long["dataset"] == ds) & np.isclose(long["epsilon"], e) & (long["measure"] == measure)]
                drawn = False
                for method, a in d.groupby("method", sort=True):
                    a = a.sort_values("budget")
                    y = _positive(a["best_excess_loss"])
                    if not np.isfinite(y).any():
                        continue
                    nonprivate = a["role"].iloc[0] == "non-private step"
                    style = {**styles[method], **({"ls": "--"} if nonprivate else {})}
                    ax.step(a["budget"], y, where="post", lw=1.3, **style,
                            label=label(method) + (" (non-private step)" if nonprivate else ""))
                    drawn = True
                if len(triv):
                    ax.axhline(float(triv.iloc[0]), color="k", ls="--", lw=1, label="trivial w=0 (ln 2 - loss*)")
                if floor is not None and len(floor):
                    f = floor[(floor["dataset"] == ds) & (floor["conversion"] == conversion)
                              & np.isclose(floor["epsilon"], e)]
                    if len(f) and float(f["ridge_floor"].iloc[0]) > 0:
                        ax.axhline(float(f["ridge_floor"].iloc[0]), color="0.45", ls=":", lw=1.2, label=FLOOR_LABEL)
                if not drawn:
                    _empty(ax, "no method costed" if measure == "runtime_s" else "no data")
                else:
                    ax.set_xscale("log")
                    ax.xaxis.set_minor_formatter(NullFormatter())
                ax.set_yscale("log")
                ax.set_title(f"{ds}, eps={e:g}")
                ax.set_xlabel(xlabel, fontsize=8)
                ax.set_ylabel("best excess loss within budget", fontsize=8)
    _legend(fig, list(grid.flat))
    fig.suptitle(f"Compute-budget frontier (best T and configuration chosen non-privately; conversion {conversion})")
    save(fig, paths)


def _legend(fig, axes):
    """One shared legend under the panels; room for it and for the suptitle."""
    handles, labels_ = {}, []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels_.append(lab)
    rows = math.ceil(len(labels_) / 4) if handles else 0
    legend_in, title_in = 0.22 * rows + 0.15, 0.45
    height = fig.get_figheight() + legend_in + title_in
    fig.set_figheight(height)
    bottom, top = legend_in / height, 1 - title_in / height
    if handles:
        fig.legend([handles[k] for k in labels_], labels_, loc="lower center", ncol=min(4, len(labels_)),
                   bbox_to_anchor=(0.5, 0.0), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, bottom, 1, top))


def publish(sources, targets) -> None:
    """Copy each source figure onto its target path atomically."""
    for src, dst in zip(sources, targets):
        with atomic_path(dst, suffix=Path(dst).suffix) as tmp:
            shutil.copyfile(src, tmp)
