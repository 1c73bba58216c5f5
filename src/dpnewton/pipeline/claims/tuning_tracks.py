"""Tuning paid for privately: the private-selection and fixed-rule tracks beside the oracle-tuned one
(not a claim of the paper; :mod:`dpnewton.pipeline.tracks` runs them).

Per (dataset, epsilon, method label of the config's ``tracks``): the oracle-tuned best, i.e. the
lowest best-T mean over the label's declared variants (non-private selection: an upper bound on what
tuning can give), beside the mean excess loss of the privately selected model and of the fixed
rule, each over the track's repetitions, and the excess loss of the trivial output w = 0, which a
tuned private model should beat.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...estimator import DEFAULT_ALGORITHM
from ..significance import ALPHA
from .ties import mark_ties, tie_sets
from .verdict import format_number as _fmt

#: the tracks in the report's order and their names
TRACKS = {"oracle-tuned": "oracle-tuned (non-private upper bound)", "private-selection": "private selection",
          "fixed-rule": "fixed rule (no tuning)"}
#: the first line of the tracks section's tie table (:func:`track_tie_lines`)
TRACK_TIES_HEADING = "Tie set per cell and track"

COLUMNS = ["dataset", "epsilon", "method", "oracle_tuned", "oracle_config", "selection", "selection_se",
           "selection_repetitions", "configurations", "expected_k", "tuning_iterations", "fixed", "fixed_se",
           "fixed_T", "trivial"]


def label_variants(tracks_cfg: dict) -> dict[str, list[str]]:
    """Method label -> the variants (config algorithm entries) it stands for, in either track."""
    out: dict[str, list[str]] = {}
    for label, m in ((tracks_cfg.get("selection") or {}).get("methods") or {}).items():
        out.setdefault(label, []).extend(m["variants"])
    for label, m in ((tracks_cfg.get("fixed") or {}).get("methods") or {}).items():
        out.setdefault(label, []).append(m["variant"])
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def tracks_comparison(tracks: pd.DataFrame, best: pd.DataFrame, tracks_cfg: dict, conversion: str,
                      baseline: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (dataset, epsilon, method label) of the tracks table; ``best`` is the best-T table,
    ``baseline`` the trivial-baseline table (``trivial_excess_loss`` per dataset)."""
    variants = label_variants(tracks_cfg)
    b = best[best["conversion"] == conversion]
    trivial = {} if baseline is None else dict(zip(baseline["dataset"], baseline["trivial_excess_loss"].astype(float)))
    rows = []
    for (ds, eps, label), g in tracks.groupby(["dataset", "epsilon", "method"], sort=True):
        rec = {"dataset": ds, "epsilon": float(eps), "method": label, "trivial": trivial.get(ds, float("nan"))}
        o = b[(b["dataset"] == ds) & np.isclose(b["epsilon"], eps) & b["algorithm"].isin(variants.get(label, []))]
        m = o["excess_loss_mean"].astype(float)
        m = m[np.isfinite(m)]
        if len(m):
            rec.update(oracle_tuned=float(m.min()), oracle_config=str(o.loc[m.idxmin(), "algorithm"]))
        for track, key in (("private-selection", "selection"), ("fixed-rule", "fixed")):
            t = g[g["track"] == track]
            if not len(t):
                continue
            r = t.iloc[0]
            rec[key], rec[f"{key}_se"] = float(r["excess_loss"]), float(r["excess_loss_se"])
            if key == "selection":
                rec.update(selection_repetitions=int(r["repetitions"]), configurations=int(r["n_configurations"]),
                           expected_k=float(r["expected_k"]), tuning_iterations=float(r["mean_candidate_iterations"]))
            else:
                rec["fixed_T"] = float(r["median_T"])
        rows.append(rec)
    return pd.DataFrame(rows, columns=COLUMNS)


def track_table(tracks: pd.DataFrame, best: pd.DataFrame, tracks_cfg: dict, conversion: str) -> pd.DataFrame:
    """Long table (dataset, epsilon, track, method, mean, se, n) of the three tracks: oracle-tuned (the
    label's lowest best-T mean over its declared variants, non-private), private selection, fixed rule."""
    variants = label_variants(tracks_cfg)
    b = best[best["conversion"] == conversion]
    rows = []
    for (ds, eps, label), g in tracks.groupby(["dataset", "epsilon", "method"], sort=True):
        o = b[(b["dataset"] == ds) & np.isclose(b["epsilon"], eps) & b["algorithm"].isin(variants.get(label, []))]
        o = o[np.isfinite(o["excess_loss_mean"].astype(float))]
        if len(o):
            r = o.loc[o["excess_loss_mean"].astype(float).idxmin()]
            listed = ((tracks_cfg.get("selection") or {}).get("methods") or {}).get(label, {}).get("iterations")
            missed = bool(listed) and int(r["best_T"]) not in listed
            rows.append((ds, float(eps), "oracle-tuned", label, r["excess_loss_mean"], r["excess_loss_se"],
                         r["n_seeds"], missed))
        for r in g.itertuples():
            rows.append((ds, float(eps), r.track, label, r.excess_loss, r.excess_loss_se, r.repetitions, False))
    return pd.DataFrame(rows, columns=["dataset", "epsilon", "track", "algorithm", "excess_loss_mean",
                                       "excess_loss_se", "n_seeds", "best_T_not_a_candidate"])


def track_ties(long: pd.DataFrame) -> dict[str, dict[tuple[str, float], list[str]]]:
    """Track -> (dataset, epsilon) -> the methods not significantly above the track's lowest mean in that cell
    (:func:`~.ties.mark_ties`, :func:`~.ties.tie_sets`), lowest first; ``long``: :func:`track_table`'s."""
    out = {}
    for track in TRACKS:
        t = long[long["track"] == track]
        if len(t):
            out[track] = tie_sets(pd.concat([mark_ties(g) for _, g in t.groupby(["dataset", "epsilon"], sort=True)]),
                                  "algorithm")
    return out


def track_tie_lines(long: pd.DataFrame) -> list[str]:
    """The table of :func:`track_ties`: per cell, each track's tie set, the lowest first with its mean."""
    head = (f"{TRACK_TIES_HEADING} (methods not significantly above the track's lowest mean, Welch p >= {ALPHA:g}; "
            "the lowest first, with its mean):")
    L = [head, "", "| dataset | eps | " + " | ".join(TRACKS.values()) + " |", "|---|---|" + "---|" * len(TRACKS)]
    ties = track_ties(long)
    lowest = long.groupby(["track", "dataset", "epsilon"])["excess_loss_mean"].min()
    for ds, eps in sorted({(ds, float(eps)) for ds, eps in zip(long["dataset"], long["epsilon"])}):
        cols = []
        for track in TRACKS:
            names = ties.get(track, {}).get((ds, eps), [])
            cols.append(f"{names[0]} ({_fmt(float(lowest[track, ds, eps]))})" + "".join(f", {m}" for m in names[1:])
                        if names else "n/a")
        L.append(f"| {ds} | {eps:g} | " + " | ".join(cols) + " |")
    return L


def with_track_ties(body: str, long: pd.DataFrame) -> str:
    """``body`` with the table after :data:`TRACK_TIES_HEADING` rebuilt from ``long`` (unchanged without one)."""
    lines = body.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(TRACK_TIES_HEADING)), None)
    if start is None or not len(long):
        return body
    end = start + 2
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines[start:end] = track_tie_lines(long)
    return "\n".join(lines)


def not_better_than_trivial(table: pd.DataFrame, column: str) -> pd.Series:
    """Rows whose ``column`` (a track's mean excess loss) is finite and not below w = 0's."""
    v, t = table[column].astype(float), table["trivial"].astype(float)
    return np.isfinite(v) & np.isfinite(t) & (v >= t)


def declared_lines(tracks_cfg: dict) -> list[str]:
    """What the config declared for the tracks: repetitions, the law of K, each method's candidates and
    fixed rule (the tuning budget of the private tracks, fixed before any data is seen)."""
    selection, fixed = tracks_cfg.get("selection") or {}, (tracks_cfg.get("fixed") or {}).get("methods") or {}
    candidates = selection.get("methods") or {}
    L = [f"Declared: {tracks_cfg['repetitions']} repetitions per cell and track."]
    if selection:
        dist = selection["distribution"]
        law = f"{dist['name']} ({', '.join(f'{k} {v}' for k, v in dist.items() if k != 'name')})"
        L[0] += (f" Private selection: K ~ {law}; a share {selection['score_frac']:g} of each candidate's rho for "
                 f"its score, per-example loss clipped to [0, {selection['score_clip']:g}].")
    L += ["", "| method | private selection: variants x T | fixed rule: variant, T |", "|---|---|---|"]
    for label in label_variants(tracks_cfg):       # every method label of either track, in config order
        m, f = candidates.get(label), fixed.get(label)
        cand = (f"{', '.join(m['variants'])} x T in {{{', '.join(str(t) for t in m['iterations'])}}}" if m else "-")
        rule = "-" if not f else f"{f['variant']}, T = " + (
            f"snr, capped at {f['max_iterations']}" if f["iterations"] == "snr" else str(f["iterations"]))
        L.append(f"| {label} | {cand} | {rule} |")
    return L + [""]


def tracks_section(table: pd.DataFrame | None, tracks_cfg: dict | None = None,
                   long: pd.DataFrame | None = None) -> list[str]:
    """The report's section on the tracks (:func:`tracks_comparison`), with what was declared
    (:func:`declared_lines`) and the tie set per cell and track (:func:`track_tie_lines` of ``long``,
    :func:`track_table`'s)."""
    if table is None or not len(table):
        return []

    def pm(mean, se) -> str:
        return "n/a" if not (isinstance(mean, float) and math.isfinite(mean)) else f"{_fmt(mean)} ± {_fmt(se, 2)}"

    L = ["", "## Tuning paid for privately: the tracks (not a claim of the paper)", "",
         "*oracle-tuned*: the lowest best-T mean over the method's declared variants, with T and the variant "
         "chosen on the true loss (**non-private**: an upper bound on what tuning can give, not a private result). "
         "*private selection*: Papernot-Steinke selection inside the cell's (epsilon, delta) (docs/algorithms.md "
         "§14): K candidates, K drawn from the declared law, each a (variant, T) drawn uniformly from the declared "
         "grid, the output the candidate with the lowest private score; the mean and s.e. of the selected model's "
         "excess loss over the repetitions of the whole procedure. *fixed rule*: one configuration fixed before "
         "any data is seen (T: an integer or the snr rule), at the full budget. *tuning iterations*: the mean "
         "total T of all candidates of one selection (its compute). *w = 0*: the excess loss of the trivial "
         "output (ln 2 - loss*); a track's loss marked **(>= w = 0)** is no better than it.", "",
         *(declared_lines(tracks_cfg) if tracks_cfg else []),
         "| dataset | eps | method | oracle-tuned (upper bound) | private selection | fixed rule (T) | w = 0 | "
         "configurations | E[K] | tuning iterations |", "|---|---|---|---|---|---|---|---|---|---|"]
    mark = {col: np.where(not_better_than_trivial(table, col), " **(>= w = 0)**", "") for col in TRACK_COLUMNS}
    for i, r in enumerate(table.itertuples()):
        fixed = pm(r.fixed, r.fixed_se) + (f" ({int(r.fixed_T)})" if isinstance(r.fixed_T, float)
                                           and math.isfinite(r.fixed_T) else "") + mark["fixed"][i]
        oracle = "n/a" if not (isinstance(r.oracle_tuned, float) and math.isfinite(r.oracle_tuned)) else \
            f"{_fmt(r.oracle_tuned)} ({r.oracle_config}){mark['oracle_tuned'][i]}"
        L.append(f"| {r.dataset} | {r.epsilon:g} | {r.method} | {oracle} | "
                 f"{pm(r.selection, r.selection_se)}{mark['selection'][i]} | {fixed} | {_fmt(r.trivial)} | "
                 f"{_fmt(r.configurations)} | {_fmt(r.expected_k)} | {_fmt(r.tuning_iterations)} |")
    if long is not None and len(long):
        L += ["", *track_tie_lines(long)]
    return L + library_default_lines(table, library_default_label(tracks_cfg))


#: a fixed rule "within this factor of the oracle-tuned best" is counted as near it (the factor of
#: docs/default_rule.md's study, which chose the library default)
NEAR_ORACLE = 1.25


def library_default_label(tracks_cfg: dict | None) -> str | None:
    """The method label whose fixed rule is the estimator's default (:data:`dpnewton.estimator.DEFAULT_ALGORITHM`
    at its card's defaults, no tuning on the private data), or None when the config declares none."""
    fixed = ((tracks_cfg or {}).get("fixed") or {}).get("methods") or {}
    return next((label for label, m in fixed.items() if m["variant"] == DEFAULT_ALGORITHM), None)


def library_default_table(table: pd.DataFrame, label: str) -> pd.DataFrame:
    """Per cell: the library default's mean excess loss (the fixed rule of ``label``) beside the lowest
    oracle-tuned and the lowest privately selected loss over every method label, and the ratios
    default / oracle-tuned best and default / private-selection best (cells without the default's
    fixed rule are left out)."""
    rows = []
    for (ds, eps), g in table.groupby(["dataset", "epsilon"], sort=True):
        own = g[(g["method"] == label) & np.isfinite(g["fixed"].astype(float))]
        if not len(own):
            continue
        rec = {"dataset": ds, "epsilon": float(eps), "default": float(own["fixed"].iloc[0]),
               "default_se": float(own["fixed_se"].iloc[0])}
        for col in ("oracle_tuned", "selection"):
            v = g[col].astype(float)
            v = v[np.isfinite(v)]
            best = (g.loc[v.idxmin(), "method"], float(v.min())) if len(v) else (None, float("nan"))
            rec[f"{col}_method"], rec[col] = best
            rec[f"{col}_ratio"] = rec["default"] / best[1] if best[1] > 0 else float("nan")
        rows.append(rec)
    return pd.DataFrame(rows)


def library_default_lines(table: pd.DataFrame, label: str | None) -> list[str]:
    """The report's comparison of the library's default (:func:`library_default_table`) with the tuned
    tracks, and how often it is within :data:`NEAR_ORACLE` and 2x of the oracle-tuned best."""
    t = library_default_table(table, label) if label else pd.DataFrame()
    if not len(t):
        return []
    L = ["", f"The library's default, `DPLogisticRegression()` ({DEFAULT_ALGORITHM} at its defaults: no tuning on "
         f"the private data; the fixed rule of `{label}` above), against the best of every method's oracle-tuned "
         "loss (**non-private** upper bound on tuning) and of every privately selected model, per cell:", "",
         "| dataset | eps | library default | oracle-tuned best (method) | default / oracle-tuned | "
         "private selection best (method) | default / private selection |", "|---|---|---|---|---|---|---|"]
    for r in t.itertuples():
        sel = "n/a" if r.selection_method is None else f"{_fmt(r.selection)} ({r.selection_method})"
        orc = "n/a" if r.oracle_tuned_method is None else f"{_fmt(r.oracle_tuned)} ({r.oracle_tuned_method})"
        L.append(f"| {r.dataset} | {r.epsilon:g} | {_fmt(r.default)} ± {_fmt(r.default_se, 2)} | {orc} | "
                 f"{_fmt(r.oracle_tuned_ratio)}x | {sel} | {_fmt(r.selection_ratio)}x |")
    ratio = default_ratios(t)
    if len(ratio):
        L += ["", f"The library default is within {NEAR_ORACLE:g}x of the oracle-tuned best in "
              f"{int((ratio <= NEAR_ORACLE).sum())} of {len(ratio)} cells and within 2x in "
              f"{int((ratio <= 2).sum())} (median {_fmt(float(ratio.median()))}x, max {_fmt(float(ratio.max()))}x)."]
    return L


def default_ratios(table: pd.DataFrame) -> pd.Series:
    """The finite ratios library default / oracle-tuned best of a :func:`library_default_table`."""
    ratio = table["oracle_tuned_ratio"].astype(float) if len(table) else pd.Series(dtype=float)
    return ratio[np.isfinite(ratio)]


#: the tracks' loss columns of the comparison table, in the report's order
TRACK_COLUMNS = ("oracle_tuned", "selection", "fixed")

