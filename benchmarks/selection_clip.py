"""The clip C of the private score in Papernot-Steinke selection (docs/algorithms.md §14), measured on
public synthetic data.

A candidate's private score is the mean per-example logistic loss clipped to [0, C] plus Gaussian
noise of sensitivity C/n (``dpnewton.tuning.private_select``). A small C gives little noise but
ranks a model that is confidently wrong on a few examples (loss far above C there, about 0
elsewhere) as if it were good. For each C of ``--clips`` this runs the private-selection track of
``config/claims.yaml`` for ``--methods`` on the **synthetic** dataset only: generated data, so that
choosing C here says nothing about the real datasets. Epsilons and repetitions are the track's; the
repetition seeds are the track's too, so every C sees the same candidates (K, configurations,
models and standard-normal score draws) and only the clip differs.

Per (method, epsilon, C): mean, s.e. and median of the selected model's excess loss over the
repetitions, and the mean private score.

    python benchmarks/selection_clip.py [--clips 1 2 5 10 30] [--methods dp-gd dp-gd-tail]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import yaml

import common
from dpnewton.pipeline.config import load_config
from dpnewton.pipeline.plan import expand
from dpnewton.pipeline.tracks import expand_tracks, repetition_seed
from dpnewton.problems import load_problem
from dpnewton.tuning import private_select

DATASET = "synthetic"


def selected(problem, spec: dict, clip: float) -> list[tuple[float, float]]:
    """(excess loss, private score) of the selected model in each repetition, with the clip ``clip``."""
    dist = dict(spec["distribution"])
    name = dist.pop("name")
    grid = [{"iterations": c["iterations"], "hyper": c["hyper"]} for c in spec["configurations"]]
    out = []
    for rep in spec["repetitions"]:
        res = private_select(problem, spec["base_algorithm"], grid, float(spec["epsilon"]), spec["delta"],
                             (name, dist), seed=repetition_seed(spec["track"], spec["method"], rep),
                             score_frac=float(spec["score_frac"]), score_clip=clip, dataset=DATASET)
        out.append((float(problem.excess_loss(res.w)), float(res.score)))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=float, nargs="+", default=[1.0, 2.0, 5.0, 10.0, 30.0])
    parser.add_argument("--methods", nargs="+", default=["dp-gd", "dp-gd-tail"])
    parser.add_argument("--config", default=str(common.REPO_DIR / "config" / "claims.yaml"))
    args = parser.parse_args(argv)
    cfg = load_config(yaml.safe_load(open(args.config)))
    plan = expand(cfg, check_data=False)
    specs = [s for _, s in expand_tracks(cfg, plan)
             if s["track"] == "private-selection" and s["dataset"] == DATASET and s["method"] in args.methods]
    problem = load_problem(DATASET, cache_dir=str(common.CACHE_DIR), **cfg["datasets"][DATASET]["options"])
    rows = []
    for spec in specs:
        for clip in args.clips:
            t0 = time.process_time()
            res = np.array(selected(problem, spec, clip))
            loss = res[:, 0]
            rows.append({"method": spec["method"], "epsilon": float(spec["epsilon"]), "clip": clip,
                         "repetitions": len(loss), "expected_k": spec["distribution"].get("mean"),
                         "configurations": len(spec["configurations"]), "mean_excess": float(loss.mean()),
                         "se_excess": float(loss.std() / np.sqrt(len(loss))),
                         "median_excess": float(np.median(loss)), "mean_score": float(np.nanmean(res[:, 1])),
                         "cpu_s": time.process_time() - t0})
            print(rows[-1], flush=True)
            common.write_csv("selection_clip.csv", rows)
    md = [f"Dataset {DATASET} ({cfg['datasets'][DATASET]['options']}); the private-selection track of "
          f"`{args.config.split('/')[-1]}` (law of K: {specs[0]['distribution']}, score share "
          f"{specs[0]['score_frac']}); the same repetition seeds for every clip C. `*_excess`: the selected "
          "model's excess loss over the repetitions (s.e. = std / sqrt(repetitions)); `mean_score`: its private "
          "score.", "",
          common.md_table(rows, ["method", "epsilon", "clip", "repetitions", "configurations", "mean_excess",
                                 "se_excess", "median_excess", "mean_score"],
                          {"mean_excess": ".4g", "se_excess": ".2g", "median_excess": ".4g", "mean_score": ".4g"}),
          ""]
    common.write_section("selection_clip", "\n".join(md))


if __name__ == "__main__":
    main()
