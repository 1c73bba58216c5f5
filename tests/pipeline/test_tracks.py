"""The private-selection and fixed-rule tracks (dpnewton.pipeline.tracks).

Known answers for the T rule and the table, the job expansion against a hand-written config,
replays of a selection and of a fixed-rule run through the library functions they must equal, the
per-release privacy ledger beside each job's rows (per repetition it sums to the run's rho), and
resumption from checkpoints with identical rows and ledger.
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpnewton.data import prepare
from dpnewton.experiment import resolve_budget, run_algorithm
from dpnewton.io import DIGEST_COLUMN
from dpnewton.pipeline import config as pipecfg
from dpnewton.pipeline import tracks
from dpnewton.pipeline.jobs import HOST_COLUMNS
from dpnewton.pipeline.run_ledger import LEDGER_COLUMNS, ledger_path
from dpnewton.privacy.selection import DISTRIBUTIONS
from dpnewton.problems import load_split_from_prepared
from dpnewton.tuning import private_select


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    return prepare("synthetic", cache_dir=d, out=d / "synthetic.npz", n=1500, d=5, seed=4).path


def _selection_spec(reps=(0, 1, 2)) -> dict:
    return {"track": "private-selection", "dataset": "synthetic", "method": "gd", "base_algorithm": "dp-gd",
            "epsilon": 1.0, "eps_label": "1", "delta": None, "repetitions": list(reps),
            "configurations": [{"variant": v, "iterations": T, "hyper": {"step": s}}
                               for v, s in (("gd4", 4.0), ("gd8", 8.0)) for T in (10, 40)],
            "distribution": {"name": "logarithmic", "mean": 3}, "score_frac": 0.1, "score_clip": 1.0}


def _fixed_spec(iterations="snr") -> dict:
    return {"track": "fixed-rule", "dataset": "synthetic", "method": "gd", "base_algorithm": "dp-gd",
            "variant": "gd4", "hyper": {"step": 4.0}, "iterations": iterations, "max_iterations": 300,
            "epsilon": 1.0, "eps_label": "1", "delta": None, "repetitions": [0, 1], "conversion": "bs16"}


def test_snr_rule_known_answers():
    # T = floor(2 rho n^2 / d): 2 * 0.5 * 100^2 / 10 = 1000
    assert tracks.snr_iterations(100, 10, 0.5, 10**6) == 1000
    assert tracks.snr_iterations(100, 10, 0.5, 300) == 300          # capped
    assert tracks.snr_iterations(10, 1000, 1e-4, 50) == 1           # at least one step
    # at that T the per-step noise's expected squared norm d sigma^2 = d T / (2 rho n^2) is <= 1 < at T + 1
    n, d, rho = 1605, 123, 0.018
    T = tracks.snr_iterations(n, d, rho, 10**9)
    assert d * T / (2 * rho * n**2) <= 1 < d * (T + 1) / (2 * rho * n**2)


def test_repetition_seeds_are_stable_and_distinct():
    seeds = {tracks.repetition_seed(t, m, r) for t in tracks.UNITS for m in ("dp-gd", "dp-gd-avg") for r in range(5)}
    assert len(seeds) == 20 and all(0 <= s < 2**63 for s in seeds)
    assert tracks.repetition_seed("fixed-rule", "x", 3) == tracks.repetition_seed("fixed-rule", "x", 3)


def test_schema_enums_are_the_registries():
    schema = pipecfg.load_schema()["properties"]["tracks"]["properties"]
    names = schema["selection"]["properties"]["distribution"]["properties"]["name"]["enum"]
    assert tuple(names) == DISTRIBUTIONS
    rule = schema["fixed"]["properties"]["methods"]["additionalProperties"]["properties"]["iterations"]["oneOf"][1]
    assert rule["enum"] == list(tracks.ITERATION_RULES)


def test_the_workflow_rules_name_the_packages_tracks_and_tables():
    """rules/tracks.smk spells the track names and table stems literally (the workflow parses without
    the package): they must be the package's."""
    text = (Path(pipecfg.SCHEMA_PATH).parents[1] / "rules" / "tracks.smk").read_text()
    constraint = re.search(r'track="([^"]+)"', text).group(1)
    assert sorted(constraint.split("|")) == sorted(tracks.TABLE_NAMES)
    stems = re.findall(r'(\w+)=multiext\("results/tables/(\w+)"', text)
    assert sorted(stem for _, stem in stems) == sorted(tracks.TABLE_NAMES.values())
    assert all(key == stem for key, stem in stems)
    # rule run_track declares the ledger where the package puts it
    rows, ledger = (re.search(rf'^\s+{key}="([^"]+)",$', text, re.MULTILINE).group(1) for key in ("rows", "ledger"))
    assert ledger == str(ledger_path(rows))


def _config(tracks_entry, check: bool = True, **extra) -> dict:
    cfg = {"datasets": {"synthetic": {"options": {"n": 300, "d": 4, "seed": 0}}}, "epsilons": [0.1, 1, 10],
           "seeds": 2, "algorithms": {"dp-gd": {"iterations": [10]},
                                      "dp-gd-s8": {"algorithm": "dp-gd", "iterations": [10], "hyper": {"step": 8.0}},
                                      "hess-clip": {"iterations": [2]}}, **extra}
    if tracks_entry is not None:
        cfg["tracks"] = tracks_entry
    if check:
        pipecfg.load_config(cfg)
    else:   # the schema's defaults without the load-time checks (dpnewton.pipeline.config_checks)
        pipecfg.fill_defaults(cfg)
    return cfg


def test_expand_tracks_from_a_config(tmp_path):
    assert tracks.expand_tracks(_config(None), None) == []
    cfg = _config({"epsilons": [1, 10], "repetitions": 3,
                   "selection": {"methods": {"gd": {"variants": ["dp-gd", "dp-gd-s8"], "iterations": [30, 10, 100]}}},
                   "fixed": {"methods": {"gd": {"variant": "dp-gd", "iterations": "snr"},
                                         "newton": {"variant": "hess-clip", "iterations": 8}}}})
    plan = pipecfg.expand(cfg, base_dir=tmp_path)
    jobs = tracks.expand_tracks(cfg, plan)
    assert [stem for stem, _ in jobs] == [
        f"results/tracks/{t}/synthetic/{m}/eps~{e}"
        for e in ("1", "10") for t, m in (("private-selection", "gd"), ("fixed-rule", "gd"), ("fixed-rule", "newton"))]
    sel = jobs[0][1]
    assert sel["repetitions"] == [0, 1, 2] and sel["base_algorithm"] == "dp-gd"
    assert sel["distribution"] == {"name": "logarithmic", "mean": 4} and sel["score_frac"] == 0.1   # schema defaults
    # 2 variants x 3 T, T sorted, each variant's hyper from algorithms
    assert [(c["variant"], c["iterations"], c["hyper"]) for c in sel["configurations"]] == [
        ("dp-gd", 10, {}), ("dp-gd", 30, {}), ("dp-gd", 100, {}),
        ("dp-gd-s8", 10, {"step": 8.0}), ("dp-gd-s8", 30, {"step": 8.0}), ("dp-gd-s8", 100, {"step": 8.0})]
    newton = jobs[2][1]
    assert newton["base_algorithm"] == "hess-clip" and newton["iterations"] == 8 and newton["max_iterations"] == 100000


@pytest.mark.parametrize("entry, message", [
    ({"selection": {"methods": {"m": {"variants": ["dp-gd", "hess-clip"], "iterations": [1]}}}},
     "different algorithms"),
    ({"selection": {"methods": {"m": {"variants": ["nope"], "iterations": [1]}}}}, "not a key of algorithms"),
    ({"fixed": {"methods": {"m": {"variant": "nope", "iterations": 2}}}}, "not a key of algorithms"),
])
def test_expand_tracks_rejects_bad_methods(tmp_path, entry, message):
    cfg = _config(entry, check=False)
    with pytest.raises(ValueError, match=message):
        tracks.expand_tracks(cfg, pipecfg.expand(cfg, base_dir=tmp_path))
    with pytest.raises(ValueError, match=message):  # and at load time, before any job
        _config(entry)


def test_precision_enters_the_track_specs_only_when_float32(tmp_path):
    """Absent or float64: no ``precision`` key, so the specs (their config hashes, checkpoint keys and
    rows) are those of a config without it; float32: the same jobs, each spec plus the key, so their
    hashes differ and float32 jobs never reuse float64 rows."""
    entry = {"epsilons": [1, 10], "repetitions": 2,
             "selection": {"methods": {"gd": {"variants": ["dp-gd", "dp-gd-s8"], "iterations": [10, 30]}}},
             "fixed": {"methods": {"gd": {"variant": "dp-gd", "iterations": "snr"}}}}

    def jobs(**extra):
        cfg = _config(copy.deepcopy(entry), **extra)
        return tracks.expand_tracks(cfg, pipecfg.expand(cfg, base_dir=tmp_path))

    absent, f64, f32 = jobs(), jobs(precision="float64"), jobs(precision="float32")
    assert len(absent) == 4 and absent == f64 and all("precision" not in spec for _, spec in absent)
    assert f32 == [(stem, {**spec, "precision": "float32"}) for stem, spec in absent]
    hashes = [{pipecfg.config_hash(spec) for _, spec in js} for js in (absent, f32)]
    assert len(hashes[0]) == len(hashes[1]) == 4 and hashes[0].isdisjoint(hashes[1])


def test_schema_rejects_an_unknown_rule():
    import jsonschema

    with pytest.raises(jsonschema.ValidationError):
        _config({"fixed": {"methods": {"m": {"variant": "dp-gd", "iterations": "auto"}}}})


def _strip(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=["runtime_s", *HOST_COLUMNS]).reset_index(drop=True)


def test_selection_rows_replay_private_select(prepared, tmp_path):
    spec = _selection_spec()
    rows = tracks.run_track_job(prepared, spec, tmp_path / "sel.csv")
    assert len(rows) == 3 and (rows["track"] == "private-selection").all()
    assert (rows["epsilon_spent"] <= 1.0 + 1e-9).all() and (rows["n_configurations"] == 4).all()
    problem, _ = load_split_from_prepared(prepared)
    for _, r in rows.iterrows():
        res = private_select(problem, "dp-gd", [{"iterations": c["iterations"], "hyper": c["hyper"]}
                                                for c in spec["configurations"]],
                             1.0, None, ("logarithmic", {"mean": 3}), seed=int(r["seed"]), dataset="synthetic",
                             score_frac=spec["score_frac"], score_clip=spec["score_clip"])
        assert r["excess_loss"] == pytest.approx(float(problem.excess_loss(res.w)), rel=1e-12)
        assert r["selected_iterations"] == res.config[0] and r["private_score"] == pytest.approx(res.score)
        assert r["secret_realised_k"] == res.record.realised_k >= 1
        assert r["secret_candidate_iterations"] == sum(c["iterations"] for c in res.record.candidates)
    # the written CSV is the returned frame, and its content digest
    written = pd.read_csv(tmp_path / "sel.csv", dtype={"eps_label": str})
    pd.testing.assert_frame_equal(_strip(written.drop(columns=DIGEST_COLUMN)), _strip(rows), check_dtype=False)


def _per_run(ledger: pd.DataFrame) -> pd.DataFrame:
    """Per seed of a ledger: the rho spent, the number of releases, and the run's identity."""
    return ledger.groupby("seed", observed=True).agg(
        rho=("rho", "sum"), releases=("release", "size"), last=("release", "max"),
        **{c: (c, "unique") for c in ["dataset", "algorithm", "conversion", "epsilon", "iterations", "config_hash"]})


def test_selection_ledger_is_the_selected_candidates(prepared, tmp_path):
    """One ledger row per release of the released model: the selected candidate's optimizer releases
    and its score, summing to candidate_rho; the losing candidates' ledgers are not written."""
    rows = tracks.run_track_job(prepared, _selection_spec(), tmp_path / "sel.csv")
    ledger = tracks.read_track_ledger(tmp_path / "sel.csv")
    assert list(ledger.columns) == LEDGER_COLUMNS
    runs = _per_run(ledger)
    assert sorted(runs.index) == sorted(rows["seed"])
    problem, _ = load_split_from_prepared(prepared)
    all_candidates = 0
    for _, r in rows.iterrows():
        run = runs.loc[r["seed"]]
        assert run["rho"] == pytest.approx(r["candidate_rho"], rel=1e-12)
        assert run["rho"] == pytest.approx(r["rho_optimizer"] + r["rho_score"], rel=1e-12)
        assert run["releases"] == r["n_releases"] == r["selected_iterations"] + 1   # T gradients, one score
        assert run["last"] == r["n_releases"] - 1
        assert [list(run[c]) for c in ["dataset", "algorithm", "conversion", "iterations", "config_hash"]] == [
            ["synthetic"], ["gd"], ["private-selection"], [r["selected_iterations"]], [r["config_hash"]]]
        res = private_select(problem, "dp-gd", [{"iterations": c["iterations"], "hyper": c["hyper"]}
                                                for c in _selection_spec()["configurations"]],
                             1.0, None, ("logarithmic", {"mean": 3}), seed=int(r["seed"]), dataset="synthetic",
                             score_frac=0.1, score_clip=1.0)
        chosen = res.record.ledgers[res.record.selected].entries
        part = ledger[ledger["seed"] == r["seed"]]
        assert list(part["quantity"]) == [e.quantity for e in chosen]
        assert list(part["sigma"]) == [e.sigma for e in chosen] and list(part["rho"]) == [e.rho for e in chosen]
        all_candidates += sum(len(led.entries) for led in res.record.ledgers)
    assert len(ledger) == rows["n_releases"].sum() < all_candidates      # some repetition had K > 1


def test_fixed_rule_rows_replay_run_algorithm(prepared, tmp_path):
    rows = tracks.run_track_job(prepared, _fixed_spec(), tmp_path / "fixed.csv")
    problem, _ = load_split_from_prepared(prepared)
    _, rho = resolve_budget(1.0, None, problem.n, "bs16")
    T = min(math.floor(2 * rho * problem.n**2 / problem.d), 300)
    assert (rows["selected_iterations"] == T).all() and (rows["iteration_rule"] == "snr").all()
    assert np.allclose(rows["ledger_rho_total"], rho, rtol=1e-12)
    ledger = tracks.read_track_ledger(tmp_path / "fixed.csv")
    assert (tmp_path / "fixed.ledger.parquet").is_file() and list(ledger.columns) == LEDGER_COLUMNS
    runs = _per_run(ledger)
    assert sorted(runs.index) == sorted(rows["seed"]) and len(ledger) == T * len(rows)   # one gradient per step
    for _, r in rows.iterrows():
        (res,) = run_algorithm(problem, "synthetic", "dp-gd", 1.0, [int(r["seed"])], T, hyper={"step": 4.0})
        assert r["excess_loss"] == pytest.approx(res.released_excess_loss, rel=1e-12)
        run = runs.loc[r["seed"]]
        assert run["rho"] == pytest.approx(r["rho"], rel=1e-12) and run["rho"] == pytest.approx(rho, rel=1e-12)
        assert run["rho"] == pytest.approx(r["ledger_rho_total"], rel=1e-12)
        assert run["releases"] == r["n_releases"] == T and run["last"] == T - 1
        assert [list(run[c]) for c in ["dataset", "algorithm", "conversion", "epsilon", "iterations", "config_hash"]] \
            == [["synthetic"], ["gd"], ["bs16"], [1.0], [T], [r["config_hash"]]]
        part = ledger[ledger["seed"] == r["seed"]]
        assert list(part["sigma"]) == [e.sigma for e in res.ledger.entries]
        assert list(part["step"]) == [e.step for e in res.ledger.entries]
    fixed = tracks.run_track_job(prepared, _fixed_spec(7), tmp_path / "seven.csv")
    assert (fixed["selected_iterations"] == 7).all() and (fixed["iteration_rule"] == "fixed").all()


@pytest.mark.parametrize("make_spec", [_fixed_spec, _selection_spec], ids=["fixed-rule", "private-selection"])
def test_a_float32_job_runs_on_float32_products_and_moves_its_results_only_slightly(prepared, tmp_path, monkeypatch,
                                                                                    make_spec):
    """Without the key the job runs on the float64 problem of load_split_from_prepared (bit for bit) and
    its config hash is the spec's; with ``precision: float32`` on Z in float32 with the float64 optimum.
    Same repetition seeds, so the same noise draws: the same T, variant, releases and sigmas, and
    excess losses within 1e-6 of float64's (float32 products: relative errors ~1e-7; observed ~1e-9)."""
    seen, real = [], tracks.track_problem

    def spy(prepared, spec):
        seen.append(real(prepared, spec))
        return seen[-1]

    monkeypatch.setattr(tracks, "track_problem", spy)
    spec = make_spec()
    r64 = tracks.run_track_job(prepared, spec, tmp_path / "f64.csv")
    r32 = tracks.run_track_job(prepared, {**spec, "precision": "float32"}, tmp_path / "f32.csv")
    reference, _ = load_split_from_prepared(prepared)
    p64, p32 = seen
    assert p64.precision == "float64" and p64.Z.dtype == np.float64 and p64.Z.tobytes() == reference.Z.tobytes()
    assert p32.precision == "float32" and p32.Z.dtype == np.float32 and p32.loss_opt == reference.loss_opt
    assert set(r64["config_hash"]) == {pipecfg.config_hash(spec)} != set(r32["config_hash"])
    for col in ("seed", "selected_iterations", "selected_variant", "n_releases"):
        assert list(r32[col]) == list(r64[col])
    np.testing.assert_allclose(r32["excess_loss"], r64["excess_loss"], rtol=0, atol=1e-6)
    assert not np.array_equal(r32["excess_loss"], r64["excess_loss"])          # the float32 products ran
    l64, l32 = (tracks.read_track_ledger(tmp_path / f"{p}.csv") for p in ("f64", "f32"))
    assert len(l64) == len(l32) > 0
    assert list(l32["sigma"]) == list(l64["sigma"]) and list(l32["rho"]) == list(l64["rho"])


def test_interrupted_track_job_resumes_with_identical_rows(prepared, tmp_path, monkeypatch):
    ref = tracks.run_track_job(prepared, _selection_spec(), tmp_path / "ref.csv")
    calls, real = [], tracks.UNITS["private-selection"]

    def dies_at_the_third(problem, spec, rep):
        calls.append(rep)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(problem, spec, rep)

    monkeypatch.setitem(tracks.UNITS, "private-selection", dies_at_the_third)
    out = tmp_path / "job.csv"
    with pytest.raises(KeyboardInterrupt):
        tracks.run_track_job(prepared, _selection_spec(), out)
    assert not out.exists() and len(list((tmp_path / "job.csv.partial").iterdir())) == 2
    calls.clear()
    monkeypatch.setitem(tracks.UNITS, "private-selection", lambda p, s, r: calls.append(r) or real(p, s, r))
    assert not ledger_path(out).exists()
    again = tracks.run_track_job(prepared, _selection_spec(), out)
    assert calls == [2]                                   # only the unfinished repetition ran
    pd.testing.assert_frame_equal(_strip(again), _strip(ref))
    # the resumed repetitions' ledger rows come from their checkpoints: the same ledger
    pd.testing.assert_frame_equal(tracks.read_track_ledger(out), tracks.read_track_ledger(tmp_path / "ref.csv"),
                                  check_exact=True)


def test_unknown_track_is_an_error(prepared, tmp_path):
    with pytest.raises(ValueError, match="track 'x' is unknown"):
        tracks.run_track_job(prepared, {**_fixed_spec(), "track": "x"}, tmp_path / "x.csv")


def test_track_table_known_answers():
    rows = pd.DataFrame({
        "track": ["private-selection"] * 3 + ["fixed-rule"] * 2, "dataset": "a", "method": "gd", "epsilon": 1.0,
        "excess_loss": [1.0, 2.0, 6.0, 0.5, 0.5], "n_configurations": [8, 8, 8, 1, 1],
        "selected_iterations": [10, 30, 100, 64, 64], "secret_candidate_iterations": [40, 30, 500, 64, 64],
        "expected_k": [4.0, 4.0, 4.0, np.nan, np.nan]})
    t = tracks.track_table(rows).set_index("track")
    sel = t.loc["private-selection"]
    assert sel["repetitions"] == 3 and sel["excess_loss"] == pytest.approx(3.0)
    assert sel["excess_loss_se"] == pytest.approx(math.sqrt(7.0) / math.sqrt(3))   # sd of 1, 2, 6 is sqrt(7)
    assert (sel["median_T"], sel["min_T"], sel["max_T"]) == (30, 10, 100)
    assert sel["mean_candidate_iterations"] == pytest.approx(190.0) and sel["expected_k"] == 4.0
    fixed = t.loc["fixed-rule"]
    assert fixed["excess_loss"] == 0.5 and fixed["excess_loss_se"] == 0 and fixed["n_configurations"] == 1


def test_write_track_tables_one_table_per_track(prepared, tmp_path):
    sel = tracks.run_track_job(prepared, _selection_spec(reps=(0, 1)), tmp_path / "sel.csv")
    fixed = tracks.run_track_job(prepared, _fixed_spec(5), tmp_path / "fixed.csv")
    outputs = {t: (tmp_path / f"{name}.parquet", tmp_path / f"{name}.csv") for t, name in tracks.TABLE_NAMES.items()}
    tracks.write_track_tables([tmp_path / "sel.csv", tmp_path / "fixed.csv"], outputs)
    s = pd.read_parquet(outputs["private-selection"][0])
    f = pd.read_csv(outputs["fixed-rule"][1])
    assert list(s["track"]) == ["private-selection"] and list(f["track"]) == ["fixed-rule"]
    assert s["excess_loss"].iloc[0] == pytest.approx(sel["excess_loss"].mean())
    assert f["excess_loss"].iloc[0] == pytest.approx(fixed["excess_loss"].mean()) and f["median_T"].iloc[0] == 5
    tracks.write_track_tables([], outputs)                 # no jobs: empty tables, still written
    assert pd.read_parquet(outputs["fixed-rule"][0]).empty
