"""The protocol of a run in words: ``results/tables/protocol.md``, the HTML report's *Protocol* entry,
written by the aggregate rule from the facts of ``protocol.json``
(:func:`dpnewton.pipeline.plan.protocol_summary`), so that the report states what the plan did
rather than re-deriving it from the config."""

from __future__ import annotations

from ..privacy.neighbouring import BENCHMARK_RELATION, LIBRARY_RELATION, RELATION_TEXT


def _list(values) -> str:
    return ", ".join(str(v) for v in values)


def _study(s: dict) -> str:
    text = f"{_list(s['algorithms'])} under {_list(s['conversions'])}"
    if s.get("epsilons"):
        text += f" at epsilon {_list(s['epsilons'])}"
    if s.get("datasets"):
        text += f" on {_list(s['datasets'])}"
    return text


def _cap(cap) -> str:
    if isinstance(cap, dict):
        rest = "".join(f", epsilon {e}: {c}" for e, c in cap.items() if e != "default")
        return f"{cap['default']}{rest}"
    return str(cap)


def protocol_markdown(p: dict) -> str:
    """``p``: the protocol dict (protocol.json's keys)."""
    delta = "n^-2 per dataset (the paper's rule)" if p["delta"] == "n^-2" else str(p["delta"])
    studies = "".join(f"; conversion study: {_study(s)}" for s in p.get("conversion_studies", []))
    dropped = f" (optional datasets without files, dropped: {_list(p['dropped_datasets'])})" \
        if p.get("dropped_datasets") else ""
    grids = []
    for name, Ts in p["grids"].items():
        v = p["variants"][name]
        label = name if v["algorithm"] == name and not v["hyper"] else f"{name} (= {v['algorithm']} with {v['hyper']})"
        grids.append(f"{label}: {' '.join(map(str, Ts))}")
    L = ["# Protocol of this run", "",
         f"* datasets: {_list(p['datasets'])}{dropped};",
         f"* epsilon grid: {_list(p['epsilons'])}; delta: {delta};",
         f"* neighbouring relation: {BENCHMARK_RELATION}, {RELATION_TEXT[BENCHMARK_RELATION]} "
         f"(the library's estimator uses {LIBRARY_RELATION}: n private);",
         f"* epsilon -> rho (zCDP) conversion: {p['conversion']} for every algorithm{studies};"]
    if p.get("holdout"):
        L.append(f"* holdout: a fraction {p['holdout']['fraction']} of each dataset's rows, split "
                 f"{p['holdout']['split']};")
    if p.get("precision"):
        L.append(f"* precision: {p['precision']} products with the data matrix (losses, optimum, clipping, noise "
                 "and ledgers in float64; benchmarks/float32.py measures the shift of mean excess losses);")
    L += [f"* seeds (repetitions): {p['n_seeds']};",
          f"* T grids (iterations): {'; '.join(grids)};"]
    if p.get("grid_extension"):
        caps = "; ".join(f"{a} {_cap(c)}" for a, c in p["grid_extension"].items() if c is not None)
        L.append(f"* grid extension: when a job's best mean-over-seeds T is the largest T of its grid, the job "
                 f"also runs T x {p['grid_extension_factor']}, repeatedly, up to its cap; at the smallest T (above 1) "
                 f"it runs T / {p['grid_extension_factor']}, down to T = 1. A best T still at an edge is flagged "
                 f"``at_edge`` (results/tables/best_T_edges.md). Caps: {caps};")
        if p.get("grid_extension_probe"):
            L.append("* probe first: in each extension round seed 0 (a chunk's first seed) runs the new T alone; if "
                     "its excess loss there is above every seed's at the current best T, the search stops without the "
                     "other seeds (rows: `probe_rejected_T`). Non-private, like the best-T selection;")
    if p.get("shared_trajectories"):
        shared = "; ".join(" + ".join(m) for m in dict.fromkeys(tuple(v) for v in p["shared_trajectories"].values()))
        L.append(f"* one trajectory, every released model: configurations that differ only in the averaging of the "
                 f"released model share their runs ({shared}); each keeps its own T grid and cap;")
        if p.get("dataset_max_passes"):
            L.append("* pass caps (grid extension stops at this many pass-equivalents per run): "
                     + "; ".join(f"{d} {c}" for d, c in p["dataset_max_passes"].items()) + ";")
    L += [f"* configurations per algorithm (tuning budget): "
          + "; ".join(f"{a} {c}" for a, c in p["configurations_per_algorithm"].items()) + ";",
          f"* selection rule: {p['selection']};",
          "* error bars and bands: +-1 standard error over seeds (std with ddof=1, the sample standard deviation, "
          "divided by sqrt(#seeds); the official code used ddof=0); runtimes count only the update steps "
          "(single-threaded BLAS), mean over seeds.",
          "", f"{p['n_jobs']} jobs; config hash {p['config_hash']}.", ""]
    return "\n".join(L)
