"""The recipes of docs/extending.md on toy inputs: a dataset spec prepared and loaded as the pipeline does,
and a claim row evaluated by the claims loop. Each test adds its entry for its own duration only."""

from __future__ import annotations

import hashlib
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpnewton.data import DatasetError, load_prepared, prepare, registry
from dpnewton.data.loaders import Built, needs, prepend_bias
from dpnewton.data.readers import read_libsvm
from dpnewton.data.registry import DatasetSpec
from dpnewton.data.sources import SourceFile
from dpnewton.data.validate import map_labels
from dpnewton.pipeline import aggregate as agg
from dpnewton.pipeline.claims import evaluation, markdown
from dpnewton.pipeline.claims.evaluation import Claim, evaluate
from dpnewton.pipeline.claims.paper import PaperClaim
from dpnewton.pipeline.claims.verdict import NOT, REPRODUCED, Verdict
from dpnewton.pipeline.plan import dataset_available
from dpnewton.pipeline.schema import fill_defaults

REPO = Path(__file__).resolve().parents[1]

TOY_SVM = b"+1 1:0.5 2:1\n-1 2:2\n+1 1:1.5\n-1 1:-1 2:0.5\n"


@needs(sources=("data",), extra=("n_features",))
def build_toy(spec, files, opts, ctx):
    path = files["data"].path
    X, raw = read_libsvm(path, spec.extra["n_features"])
    y, mapping = map_labels(raw, str(path))
    return Built(prepend_bias(X), y, "toy-v1", mapping)


def toy_spec(**changes) -> DatasetSpec:
    fields = dict(name="toy", description="toy.svm: svmlight -> dense, prepend 1", build=build_toy,
                  sources={"data": SourceFile("toy.svm", "toy", (), (hashlib.sha256(TOY_SVM).hexdigest(),))},
                  shape=(4, 3), bias=True, extra={"n_features": 2})
    return DatasetSpec(**{**fields, **changes})


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """A data folder with toy/toy.svm; the toy spec is in the table prepare() reads until the test ends."""
    (tmp_path / "data" / "toy").mkdir(parents=True)
    (tmp_path / "data" / "toy" / "toy.svm").write_bytes(TOY_SVM)
    monkeypatch.setattr(registry, "DATASETS", registry.by_name([*registry.DATASETS.values(), toy_spec()]))
    return tmp_path / "data"


def test_a_new_dataset_prepares_and_loads(data_dir):
    assert dataset_available("toy", data_dir, allow_download=False) == (True, "")
    pd_ = prepare("toy", data_dir=data_dir, cache_dir=data_dir.parent / "cache")
    assert pd_.path == data_dir.parent / "cache" / "toy.npz" and pd_.path.with_suffix(".json").is_file()
    assert np.array_equal(pd_.X, [[1, 0.5, 1], [1, 0, 2], [1, 1.5, 0], [1, -1, 0.5]])
    assert np.array_equal(pd_.y, [1, -1, 1, -1])
    src = pd_.meta["sources"][0]
    assert src["verified"] and src["origin"] == "data_dir" and src["sha256"] == hashlib.sha256(TOY_SVM).hexdigest()
    assert pd_.meta["preprocessing"] == "toy-v1" and pd_.meta["bias"] is True
    loaded = load_prepared(pd_.path)
    assert np.array_equal(loaded.X, pd_.X) and loaded.meta == pd_.meta
    again = prepare("toy", data_dir=data_dir, cache_dir=data_dir.parent / "cache")  # the cache, checked
    assert again.meta["cache_key"] == pd_.meta["cache_key"]


def test_a_new_dataset_checks_its_checksum(data_dir):
    (data_dir / "toy" / "toy.svm").write_bytes(TOY_SVM.replace(b"0.5", b"0.6"))
    with pytest.raises(DatasetError, match="checksum mismatch"):
        prepare("toy", data_dir=data_dir, cache_dir=data_dir.parent / "cache")


@pytest.mark.parametrize("changes, message", [
    ({"extra": {}}, r"build function build_toy needs extra\['n_features'\]"),
    ({"sources": {}}, r"needs sources\['data'\]"),
    ({"build": "build_toy"}, "build must be a function"),
    ({"options": {"force": True}}, "common options"),
    ({"shape": (4,)}, "shape must be"),
])
def test_a_spec_missing_what_its_functions_need_fails_at_definition(changes, message):
    with pytest.raises(DatasetError, match=message):
        toy_spec(**changes)


def test_malformed_source_files_and_duplicate_names_fail_at_definition():
    with pytest.raises(DatasetError, match="sha256 must be a tuple"):
        SourceFile("toy.svm", "toy", (), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
    with pytest.raises(DatasetError, match="installed_key"):
        SourceFile("toy.svm", "toy", installed_key="nowhere")
    with pytest.raises(DatasetError, match="two dataset specs are named 'toy'"):
        registry.by_name([toy_spec(), toy_spec()])


def check_close_to_dp_gd(claim, ev):
    """Ours' best loss within ``factor`` x DP-GD's at every epsilon."""
    factor = claim.values["factor"]
    for ds in ev.datasets:
        d = ev.cells[ev.cells["dataset"] == ds]
        ours = d[d["base"].isin(ev.ours)].groupby("epsilon")["excess_loss_mean"].min()
        dp_gd = d[d["base"] == ev.baseline].groupby("epsilon")["excess_loss_mean"].min()
        ok = int((ours <= factor * dp_gd.reindex(ours.index)).sum())
        verdict = REPRODUCED if len(ours) and ok == len(ours) else NOT
        yield claim.name(), ds, Verdict(verdict, f"{ok}/{len(ours)}", f"within {factor:g}x at {ok} epsilons")


TOY_CLAIM = Claim(PaperClaim("C7", "{id} ours within {factor:g}x of DP-GD", "close to DP-GD", "Section 5",
                             {"factor": 2.0}),
                  check_close_to_dp_gd, settings=("a", "c"))


def claim_tables():
    """Runs of hess-clip, qu-clip and DP-GD on dataset s (losses 0.1 / T times 1, 1.1 and 3) and the
    tables evaluate() reads."""
    scale = {"hess-clip": 1.0, "qu-clip": 1.1, "dp-gd": 3.0}
    runs = pd.DataFrame([{"dataset": "s", "algorithm": a, "base_algorithm": a, "conversion": c, "epsilon": e,
                          "iterations": T, "seed": seed, "resets": 0, "diverged": False, "hyper": "{}",
                          "excess_loss": k * 0.1 / T * (1 + 0.01 * seed)}
                         for c in ("bs16", "gdp") for a, k in scale.items() for e in (0.1, 1.0) for T in (1, 2, 4)
                         for seed in range(2)])
    runs["runtime_s"] = runs["iterations"] * 0.1
    runs["rho"], runs["delta"], runs["ledger_rho_total"] = 0.5, 1e-8, 0.5
    runs["package_version"], runs["numpy_version"], runs["git_revision"] = "0.1", "2.4.6", "aaa"
    summary = agg.summarize(agg.check_privacy(runs))
    best = agg.best_t(summary).assign(edge="")
    baseline = pd.DataFrame({"dataset": ["s"], "trivial_excess_loss": [0.5]})
    curves = pd.DataFrame(columns=["dataset", "algorithm", "conversion", "epsilon", "iterate", "elapsed_s_mean",
                                   "excess_loss_mean"])
    costs = pd.DataFrame({"dataset": "s", "algorithm": list(scale), "base_algorithm": list(scale),
                          "first_update_s": 0.1, "s_per_update": [0.1, 0.1, 0.5]})
    return runs, summary, best, baseline, curves, costs


def test_a_new_claim_is_evaluated_and_reported(monkeypatch):
    monkeypatch.setattr(evaluation, "CLAIMS", (*evaluation.CLAIMS, TOY_CLAIM))
    runs, summary, best, baseline, curves, costs = claim_tables()
    verdicts, extra = evaluate(runs, summary, best, baseline, curves, costs, fill_defaults({})["claims"],
                               official=lambda e, d: 1e-3)
    toy = verdicts[verdicts["claim"] == "C7 ours within 2x of DP-GD"]
    assert list(toy["setting"]) == ["a", "c"] and list(toy["conversion"]) == ["bs16", "gdp"]
    assert set(toy["dataset"]) == {"s"} and set(toy["paper"]) == {"close to DP-GD"}
    assert set(toy["verdict"]) == {REPRODUCED} and set(toy["ours"]) == {"2/2"}
    assert verdicts["claim"].str.startswith("C1 best").any()  # the table's own rows still run
    md = markdown(verdicts, extra, {"datasets": ["s"], "epsilons": ["0.1", "1"], "n_seeds": 2}, baseline)
    assert "| C7 ours within 2x of DP-GD | a | s | 2/2 | **reproduced** | within 2x at 2 epsilons |" in md


def test_a_claim_row_without_a_rule_or_with_an_unknown_setting_fails_at_definition():
    with pytest.raises(TypeError, match="rule must be a function"):
        Claim(TOY_CLAIM.paper, "check_close_to_dp_gd")
    with pytest.raises(ValueError, match="settings"):
        Claim(TOY_CLAIM.paper, check_close_to_dp_gd, settings=("z",))


def test_the_toy_entries_do_not_leak():
    assert "toy" not in registry.DATASETS and TOY_CLAIM not in evaluation.CLAIMS


def layout_map() -> list[str]:
    """The paths of the layout map in docs/extending.md (its last code block)."""
    text = (REPO / "docs" / "extending.md").read_text()
    block = text.split("## Layout", 1)[1].split("```")[1]
    return [line.split()[0] for line in block.strip().splitlines() if line.strip()]


def test_the_layout_map_lists_every_module_and_workflow_file():
    """Every module of src/dpnewton and every file of workflow/ has its line, in the tree's order of
    layers, and every line names a file that exists."""
    listed = layout_map()
    assert len(listed) == len(set(listed)), "a path is listed twice"
    tree = {str(p.relative_to(REPO)) for p in (REPO / "src" / "dpnewton").rglob("*.py")}
    tree |= {str(p.relative_to(REPO)) for p in (REPO / "workflow").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert sorted(tree - set(listed)) == [], "missing from the layout map in docs/extending.md"
    assert sorted(set(listed) - tree) == [], "listed in docs/extending.md but not in the tree"


def test_a_new_figure_is_drawn_through_the_rule_entry_point(tmp_path, monkeypatch):
    """The figure recipe: one SPECS entry (tables, draw function, caption) drawn by draw_figure, the
    figure rule's entry point, from verified parquet tables."""
    from dpnewton.io import atomic_write_parquet
    from dpnewton.pipeline import figures, plots

    def draw(t, p, outputs, styles):
        fig, ax = plots.plt.subplots()
        ax.plot(t["best"]["epsilon"], t["best"]["excess_loss_mean"], **styles["dp-gd"])
        plots.save(fig, outputs)

    spec = figures.Figure("Figure 10: toy", {"best": "best_T"}, draw, lambda cfg, study: "Figure 10: toy.",
                          made=lambda plan, params: params.get("toy", False))
    monkeypatch.setattr(figures, "SPECS", {**figures.SPECS, "fig10_toy": spec})
    table = tmp_path / "best_T.parquet"
    atomic_write_parquet(table, pd.DataFrame({"epsilon": [0.1, 1.0], "excess_loss_mean": [0.3, 0.1]}))
    out = tmp_path / "fig10_toy.png"
    figures.draw_figure("fig10_toy", {"best": str(table)}, [str(out)], {"methods": ["dp-gd"]})
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert figures.get_figure("fig10_toy").caption({}, {}) == "Figure 10: toy."
    params = {"toy": True, "figures": {"minibatch_baseline": "dp-sgd", "minibatch_algorithms": [],
                                       "privacy_utility_algorithms": []}, "minibatch": [], "conversions": ["bs16"]}
    assert "fig10_toy" in figures.made_figures(types.SimpleNamespace(holdout=None, algorithms={}), params)
    with pytest.raises(ValueError, match="no figure 'fig11'"):
        figures.get_figure("fig11")


def test_prepare_takes_any_dataset_option(tmp_path, capsys):
    """`dpnewton prepare NAME --option KEY=VALUE` passes a spec's own options (no flag per option needed)."""
    from dpnewton.data.cli import main

    assert main(["prepare", "synthetic", "--cache-dir", str(tmp_path), "--option", "n=60", "--option", "d=3"]) == 0
    prepared = load_prepared(tmp_path / "synthetic.npz")
    assert prepared.X.shape == (60, 3)
    with pytest.raises(SystemExit):
        main(["prepare", "synthetic", "--cache-dir", str(tmp_path), "--option", "n"])
    assert "expected KEY=VALUE" in capsys.readouterr().err
