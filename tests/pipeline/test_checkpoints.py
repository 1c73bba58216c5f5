"""Checkpoints of a pipeline job: an interrupted job resumes its finished (grid round, seed) units.

``run_job`` runs each grid round's unfinished seeds as one batch and writes each (grid round, seed)
unit's rows, curves and ledger, with their SHA-256, to ``<rows>.partial/``. A job killed in its third
round and run again must compute only the units it had not finished, and its tables must equal those
of an uninterrupted job (update times aside, which are measured, not computed), as must those of
jobs of one seed each; a unit checkpointed in the format from before the digest and the ledger is
still resumed (its runs then have no ledger rows). Checkpoints of another spec and unreadable files
must be recomputed, never trusted (a unit that fails its digest: tests/pipeline/test_damaged_files.py). The
job's privacy ledger has one row per release, and per run sums to the row's ledger total.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from dpnewton.data import prepare
from dpnewton.io import read_csv
from dpnewton.pipeline import checkpoints, jobs, run_ledger
from dpnewton.pipeline.jobs import HOST_COLUMNS

TIMED = ["runtime_s", "elapsed_s"]


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    return prepare("synthetic", cache_dir=d, out=d / "synthetic.npz", n=2000, d=5, seed=3).path


def _spec(step: float = 4.0) -> dict:
    # DP-GD (n = 2000) at epsilon 10 keeps improving up to T = 4, so the grid is extended to 8 and 16 (3 rounds)
    return {"dataset": "synthetic", "dataset_options": {}, "algorithm": "dp-gd", "base_algorithm": "dp-gd",
            "conversion": "bs16", "primary": True, "eps_label": "10", "epsilon": 10.0,
            "seeds": [0, 1], "iterations": [1, 2, 4], "delta": None, "hyper": {"step": step},
            "curves_max_points": 6, "extend": {"factor": 2, "max_iterations": 16}}


def _counting_units(monkeypatch, fail_at: int | None = None) -> list:
    """Patch the batch runner to count its calls and to raise on call number ``fail_at``."""
    calls = []
    real = jobs._run_units

    def units(*args, **kwargs):
        calls.append((tuple(args[2]), args[3]))  # (seeds of the batch, grid_round)
        if fail_at is not None and len(calls) == fail_at:
            raise Interrupted
        return real(*args, **kwargs)

    monkeypatch.setattr(jobs, "_run_units", units)
    return calls


def _tables(out):
    # the update times and when/where a run was made may differ between runs
    rows = read_csv(out / "rows.csv").drop(columns=[*TIMED[:1], *HOST_COLUMNS])  # verified, without file_rows
    rows = rows.sort_values(["grid_round", "seed", "iterations"])
    curves = pd.read_parquet(out / "curves.parquet").drop(columns=TIMED[1:])
    return rows.reset_index(drop=True), curves.sort_values(["seed", "iterations", "iterate"]).reset_index(drop=True)


def _unit(path):
    """The unit a checkpoint file holds (its body, after the SHA-256 check)."""
    return checkpoints.checkpoint_body(pd.read_pickle(path))


def _run(prepared, out, spec):
    return jobs.run_job(prepared, spec, out / "rows.csv", out / "curves.parquet")


def test_interrupted_job_resumes_from_its_finished_units(prepared, tmp_path, monkeypatch, caplog):
    ref = tmp_path / "ref"
    calls = _counting_units(monkeypatch)
    _run(prepared, ref, _spec())
    ref_rows, ref_curves = _tables(ref)
    assert sorted(ref_rows["iterations"].unique()) == [1, 2, 4, 8, 16]
    assert calls == [((0, 1), 0), ((0, 1), 1), ((0, 1), 2)]  # one batch of both seeds per round
    assert not jobs.checkpoint_dir(ref / "rows.csv").exists()  # removed once the job succeeded

    out = tmp_path / "job"
    _counting_units(monkeypatch, fail_at=3)  # dies in round 2
    with pytest.raises(Interrupted):
        _run(prepared, out, _spec())
    partial = jobs.checkpoint_dir(out / "rows.csv")
    assert sorted(p.name for p in partial.glob("*.pkl")) == ["round0_seed0.pkl", "round0_seed1.pkl",
                                                             "round1_seed0.pkl", "round1_seed1.pkl"]
    assert not (out / "rows.csv").exists() and not (out / "curves.parquet").exists()
    (partial / "round1_seed1.pkl").unlink()  # a unit that was not written: round 1 resumes with seed 1 alone

    first_attempt = {p.name: _unit(p)["seconds"] for p in partial.glob("*.pkl")}
    assert all(t > 0 for t in first_attempt.values())
    # as written before checkpoints kept their time, their ledger and a digest: the unit itself, unhashed
    saved = pd.read_pickle(partial / "round0_seed0.pkl")
    older = {"key": saved["key"], **_unit(partial / "round0_seed0.pkl")}
    del older["seconds"], older["ledger"], first_attempt["round0_seed0.pkl"]
    pd.to_pickle(older, partial / "round0_seed0.pkl")

    resumed = _counting_units(monkeypatch)
    with caplog.at_level(logging.INFO, logger="dpnewton.pipeline"):
        _run(prepared, out, _spec())
    assert resumed == [((1,), 1), ((0, 1), 2)]  # only the unfinished units
    # the resumed units' progress lines carry the time of the attempt that computed them
    notes = [m.split("[from checkpoint")[1] for m in caplog.messages if "[from checkpoint" in m]
    assert sorted(notes) == sorted(["]"] + [f", computed in {t:.1f}s]" for t in first_attempt.values()])
    assert sum("[one batch of 2 seeds]" in m for m in caplog.messages) == 2  # round 2's two units
    rows, curves = _tables(out)
    pd.testing.assert_frame_equal(rows, ref_rows)
    pd.testing.assert_frame_equal(curves, ref_curves)
    assert not partial.exists()
    # the ledger: the uninterrupted job's, less the runs of the unit resumed from the old-format checkpoint
    ledger, ref_ledger = run_ledger.read_ledger(out / "rows.csv"), run_ledger.read_ledger(ref / "rows.csv")
    old_unit = (ref_ledger["seed"] == 0) & ref_ledger["iterations"].isin([1, 2, 4])
    pd.testing.assert_frame_equal(_sorted(ledger), _sorted(ref_ledger[~old_unit]))
    assert "predates the privacy ledger" in caplog.text


def _sorted(ledger: pd.DataFrame) -> pd.DataFrame:
    return ledger.sort_values(["seed", "iterations", "release"]).reset_index(drop=True)


def test_the_job_writes_each_runs_privacy_ledger(prepared, tmp_path):
    """One row per release beside the rows file; per run its rho sums to ledger_rho_total and its rows
    count to n_releases; DP-GD releases one gradient per step, sigma = sensitivity / sqrt(2 rho)."""
    _run(prepared, tmp_path, _spec())
    rows = read_csv(tmp_path / "rows.csv")
    ledger = run_ledger.read_ledger(tmp_path / "rows.csv")
    assert jobs.ledger_path(tmp_path / "rows.csv") == tmp_path / "rows.ledger.parquet"
    assert list(ledger.columns) == run_ledger.LEDGER_COLUMNS
    per_run = ledger.groupby(["seed", "iterations"]).agg(rho=("rho", "sum"), releases=("rho", "size"),
                                                          steps=("step", "max"), hash=("config_hash", "first"))
    runs = rows.set_index(["seed", "iterations"]).sort_index()
    assert list(per_run.index) == list(runs.index) and len(runs) == 10  # 2 seeds x T in {1, 2, 4, 8, 16}
    assert np.allclose(per_run["rho"], runs["ledger_rho_total"], rtol=1e-12, atol=0)
    assert (per_run["releases"] == runs["n_releases"]).all()
    assert (per_run["steps"] == runs.index.get_level_values("iterations") - 1).all()
    assert (per_run["hash"] == runs["config_hash"]).all()
    assert set(ledger["quantity"]) == {"gradient"} and ledger["release"].eq(ledger["step"]).all()
    assert np.allclose(ledger["sigma"], ledger["sensitivity"] / np.sqrt(2 * ledger["rho"]), rtol=1e-12)


def test_jobs_of_one_seed_give_the_rows_of_the_batched_job(prepared, tmp_path):
    """A run's numbers do not depend on the seeds batched with it: the jobs of seeds_per_job = 1 give the
    batched job's rows for every (seed, T) they share (each chunk extends its grid on its own seeds)."""
    _run(prepared, tmp_path / "both", _spec())
    both, both_curves = _tables(tmp_path / "both")
    for seed in (0, 1):
        out = tmp_path / f"seed{seed}"
        _run(prepared, out, {**_spec(), "seeds": [seed]})
        alone, alone_curves = _tables(out)
        for got, ref in ((alone, both), (alone_curves, both_curves)):
            keys = ["seed", "iterations"]
            shared = ref.merge(got[keys].drop_duplicates(), on=keys)
            assert len(shared) and shared["seed"].eq(seed).all()
            # the job's identity (its spec hash names its seeds) and grid history are the chunk's own
            chunk = ["config_hash", "grid_round", "grid_extended"]
            mine = got.merge(shared[keys].drop_duplicates(), on=keys)
            pd.testing.assert_frame_equal(mine.drop(columns=chunk, errors="ignore"),
                                          shared.drop(columns=chunk, errors="ignore"))


def test_unreadable_checkpoints_and_those_of_another_spec_are_recomputed(prepared, tmp_path, monkeypatch):
    out = tmp_path / "damaged"
    _counting_units(monkeypatch, fail_at=2)  # round 0 of seeds 0 and 1 finished
    with pytest.raises(Interrupted):
        _run(prepared, out, _spec())
    (jobs.checkpoint_dir(out / "rows.csv") / "round0_seed1.pkl").write_bytes(b"not a pickle")
    calls = _counting_units(monkeypatch)
    _run(prepared, out, _spec())
    assert calls[:2] == [((1,), 0), ((0, 1), 1)]  # seed 0 reused, seed 1 recomputed

    out = tmp_path / "changed"
    _counting_units(monkeypatch, fail_at=2)
    with pytest.raises(Interrupted):
        _run(prepared, out, _spec(step=4.0))
    calls = _counting_units(monkeypatch)
    _run(prepared, out, _spec(step=2.0))  # the config changed: the step-4 units do not belong to it
    assert calls[0] == ((0, 1), 0)

    ref = tmp_path / "ref"
    _run(prepared, ref, _spec(step=2.0))
    for got, want in zip(_tables(out), _tables(ref)):
        pd.testing.assert_frame_equal(got, want)


def test_a_pass_cap_stops_the_extension(prepared, tmp_path):
    """The same job with the dataset's cap of 8 pass-equivalents (DP-GD: one per step) stops at T = 8."""
    _run(prepared, tmp_path / "capped", {**_spec(), "extend": {"factor": 2, "max_iterations": 16, "max_passes": 8}})
    rows, _ = _tables(tmp_path / "capped")
    assert sorted(rows["iterations"].unique()) == [1, 2, 4, 8]
