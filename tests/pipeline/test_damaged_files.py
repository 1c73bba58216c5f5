"""Damaged intermediate files are detected on read and never aggregated or trusted silently.

Each result, optimum and checkpoint file carries what its reader needs (``dpnewton.io``): the run,
track and timing CSVs ``file_rows`` and ``file_sha256`` columns and a final line break, parquet files
their footer, page CRCs and frame digest, a table's CSV mirror its SHA-256 in its twin's footer, the
optimum's and a prepared file's JSON the SHA-256 of their npz and of themselves, a checkpoint the
SHA-256 of its unit. Unit
tests cut and change real files at every position and check the exact error (file, problem, fix);
the slow workflow tests damage a finished run's optimum and one of its run files, and check that
Snakemake stops before any job with the one-line message, that nothing under ``results/`` was
deleted or changed, and that the documented fix (delete the file, ``snakemake <file>``) restores
the same tables; for the optimum without rerunning the jobs that read it (the recomputed files are
byte-identical, so Snakemake's input checksums match).

Measured on the shared 2-core machine at load 2-5: the 10 unit tests 13 s; the 2 workflow tests
51 s, of which about 25 s is the reference run of tests/workflow/test_determinism.py (made once per session,
shared when run together).
"""

from __future__ import annotations

import json
import logging
import pickle
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpnewton import io
from dpnewton.data import prepare
from dpnewton.data.prepare import check_prepared_file, prepared_fix
from dpnewton.pipeline import aggregate as agg
from dpnewton.pipeline import jobs, resources, tables, timing, tracks
from dpnewton.pipeline.claims.bundle import write_bundle
from dpnewton.problems import compute_optimum, load_problem_from_prepared, optimum_fix, optimum_paths
from tests.workflow.test_determinism import REPO, env, reference_run, snakemake_cmd, table_differences

RUN_FIX = "rule run_job recomputes it"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    return prepare("synthetic", cache_dir=d, out=d / "synthetic.npz", n=400, d=4, seed=1).path


@pytest.fixture(scope="module")
def job(prepared, tmp_path_factory):
    """A finished run job: DP-GD, 2 seeds x 8 T = 16 rows (the size of the reported case)."""
    out = tmp_path_factory.mktemp("job")
    spec = {"dataset": "synthetic", "dataset_options": {}, "algorithm": "dp-gd", "base_algorithm": "dp-gd",
            "conversion": "bs16", "primary": True, "eps_label": "1", "epsilon": 1.0, "seeds": [0, 1],
            "iterations": [1, 2, 3, 4, 5, 6, 7, 8], "delta": None, "hyper": {}, "curves_max_points": 4, "extend": None}
    jobs.run_job(prepared, spec, out / "seeds~0-1.csv", out / "seeds~0-1.curves.parquet")
    return out


def _cut(src: Path, dst: Path, size: int) -> Path:
    dst.write_bytes(src.read_bytes()[:size])
    return dst


# ---- CSV: the run rows ------------------------------------------------------------------------
def test_every_cut_of_a_run_file_is_detected(job, tmp_path):
    assert io.check_csv(job / "seeds~0-1.csv", min_rows=1) == 16
    rows = tmp_path / "three.csv"  # three of its rows, as a job of three runs writes them (about 2 kB)
    io.atomic_write_csv(rows, agg.read_rows(job / "seeds~0-1.csv").iloc[:3])
    assert io.check_csv(rows, min_rows=1) == 3
    raw = rows.read_bytes()
    for size in range(len(raw)):  # every byte position, including the empty file
        with pytest.raises(io.DamagedFileError):
            io.check_csv(_cut(rows, tmp_path / "cut.csv", size), min_rows=1)


def test_a_run_file_that_lost_two_rows_is_not_aggregated(job, tmp_path):
    """The reported case (16 rows read as 14): the error names the file, both counts and the fix."""
    rows = job / "seeds~0-1.csv"
    lines = rows.read_text().splitlines(keepends=True)
    cut = tmp_path / "seeds~0-1.csv"
    cut.write_text("".join(lines[:15]))  # header + 14 whole rows
    with pytest.raises(io.DamagedFileError) as err:
        agg.load_rows([rows, cut])
    assert str(err.value) == (f"{cut} is damaged (it holds 14 rows and was written with 16): delete it and run "
                              f"`snakemake {cut}` (the target before your other options): {RUN_FIX}")
    half = _cut(rows, tmp_path / "half.csv", len(rows.read_bytes()) // 2)
    with pytest.raises(io.DamagedFileError, match=r"half\.csv is damaged \(it ends inside a row"):
        agg.load_rows([half])
    # the intact file loads, without the file_rows column, all 16 rows
    runs = agg.load_rows([rows])
    assert len(runs) == 16 and io.ROWS_COLUMN not in runs and runs["seed"].nunique() == 2


def _changed(rows: Path, dst: Path, column: str, row: int, value: str) -> Path:
    """``rows`` with one field (data row ``row``, 1-based, of ``column``) replaced by ``value``, textually."""
    lines = rows.read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    fields = lines[row].rstrip("\n").split(",")
    assert len(fields) == len(header)  # no quoted commas in these rows
    fields[header.index(column)] = value
    lines[row] = ",".join(fields) + "\n"
    dst.write_text("".join(lines))
    return dst


def test_one_changed_digit_in_a_run_file_is_not_aggregated(job, tmp_path):
    """The reported case: one digit of one excess loss changed moved the summary mean by +4.5 in silence."""
    rows = job / "seeds~0-1.csv"
    header, first = (line.split(",") for line in rows.read_text().splitlines()[:2])
    value = first[header.index("excess_loss")]
    assert value.startswith("0.")
    bad = _changed(rows, tmp_path / "seeds~0-1.csv", "excess_loss", 1, "5" + value[1:])  # +5 on one run
    mean = agg.summarize(agg.load_rows([rows]).assign(excess_loss=lambda f: f["excess_loss"].where(
        f.index != 0, float("5" + value[1:]))))["excess_loss_mean"]
    assert (mean - agg.summarize(agg.load_rows([rows]))["excess_loss_mean"]).max() == pytest.approx(2.5)
    assert io.check_csv(rows, min_rows=1) == 16
    with pytest.raises(io.DamagedFileError) as err:
        agg.load_rows([rows, bad])
    assert str(err.value) == (f"{bad} is damaged (its contents do not match the SHA-256 in its file_sha256 column: a "
                              f"value was changed after it was written): delete it and run `snakemake {bad}` (the "
                              f"target before your other options): {RUN_FIX}")
    # the start check of the workflow (io.check_csv) reports it the same way, so nothing is deleted
    with pytest.raises(io.DamagedFileError, match="do not match the SHA-256"):
        io.check_csv(bad, min_rows=1)


def test_a_non_numeric_value_in_a_run_file_is_named(job, tmp_path):
    """The digest catches it; a file without one (or with a digest recomputed by hand) is caught by
    the column check, which names the column and the row."""
    rows = job / "seeds~0-1.csv"
    bad = _changed(rows, tmp_path / "bad.csv", "runtime_s", 3, "fast")
    with pytest.raises(io.DamagedFileError, match="do not match the SHA-256"):
        agg.load_rows([bad])
    frame = pd.read_csv(bad).drop(columns=[io.DIGEST_COLUMN])
    frame.to_csv(bad, index=False)
    with pytest.raises(io.DamagedFileError) as err:
        agg.load_rows([bad])
    assert str(err.value).startswith(f"{bad} is damaged (row 3 has 'fast' in column runtime_s, which takes numbers)")


def test_a_changed_table_csv_fails_against_its_parquet_twin(tmp_path):
    frame = pd.DataFrame({"a": range(5), "b": [0.5, 1.5, 2.5, 3.5, 4.5]})
    agg.write_frame(frame, tmp_path / "t.parquet", tmp_path / "t.csv")
    assert agg.check_table_csv(tmp_path / "t.csv", tmp_path / "t.parquet") == 5
    (tmp_path / "t.csv").write_text((tmp_path / "t.csv").read_text().replace("2.5", "7.5"))
    with pytest.raises(io.DamagedFileError, match=r"t\.csv is damaged \(its SHA-256 is not the one its parquet twin "
                                                  r"recorded"):
        agg.check_table_csv(tmp_path / "t.csv", tmp_path / "t.parquet")


def test_flipped_bytes_inside_a_prepared_file_fail_the_start_check(prepared, tmp_path):
    """The reported case: bytes flipped inside X (zip directory intact) passed the start check, and rule
    optimum, rerun for the newer input, deleted the cached optimum before it failed."""
    npz = tmp_path / "synthetic.npz"
    shutil.copy(prepared, npz)
    shutil.copy(prepared.with_suffix(".json"), tmp_path / "synthetic.json")
    assert check_prepared_file(npz)["npz_sha256"] == io.file_sha256(npz)
    raw = bytearray(npz.read_bytes())
    raw[len(raw) // 3] ^= 0xFF  # inside the array data, far from the zip directory at the end
    npz.write_bytes(raw)
    assert io.check_npz(npz)  # the old start check: the zip directory is intact
    with pytest.raises(io.DamagedFileError) as err:
        check_prepared_file(npz)
    assert str(err.value) == (f"{npz} is damaged (its SHA-256 is not the one recorded in synthetic.json when both "
                              f"were written): {prepared_fix(npz)}")
    # a sidecar from before npz_sha256 (and json_sha256): the members' zip CRCs catch the same flip
    meta = json.loads((tmp_path / "synthetic.json").read_text())
    del meta["npz_sha256"], meta[io.JSON_DIGEST_KEY]
    (tmp_path / "synthetic.json").write_text(json.dumps(meta))
    with pytest.raises(io.DamagedFileError, match=r"synthetic\.npz is damaged \(its member X\.npy fails its CRC\)"):
        check_prepared_file(npz)


def test_a_prepared_file_is_byte_reproducible(tmp_path):
    a = prepare("synthetic", cache_dir=tmp_path, out=tmp_path / "a.npz", n=50, d=3, seed=2)
    b = prepare("synthetic", cache_dir=tmp_path, out=tmp_path / "b.npz", n=50, d=3, seed=2)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert a.meta["npz_sha256"] == b.meta["npz_sha256"] == io.file_sha256(tmp_path / "a.npz")


def test_a_file_without_the_row_count_is_checked_by_its_seeds(job, tmp_path):
    """Rows written before files carried their count: every seed must have the job's T grid."""
    frame = pd.read_csv(job / "seeds~0-1.csv").drop(columns=[io.ROWS_COLUMN, io.DIGEST_COLUMN])
    legacy = tmp_path / "legacy.csv"
    frame.iloc[:14].to_csv(legacy, index=False)
    with pytest.raises(io.DamagedFileError, match=r"legacy\.csv is damaged \(the seeds of dp-gd bs16 epsilon 1 have "
                                                  r"different numbers of runs \(seed 0: 8, seed 1: 6\)\)"):
        agg.load_rows([legacy])
    frame.to_csv(legacy, index=False)
    assert len(agg.load_rows([legacy])) == 16


def test_damaged_track_and_timing_files_are_errors(tmp_path):
    frame = pd.DataFrame({"track": ["fixed-rule"] * 3, "dataset": "s", "method": "m", "epsilon": 1.0,
                          "excess_loss": [0.1, 0.2, 0.3], "n_configurations": 1, "selected_iterations": 4,
                          "secret_candidate_iterations": 4})
    rows = tmp_path / "eps~1.csv"
    io.atomic_write_csv(rows, frame)
    lines = rows.read_text().splitlines(keepends=True)
    rows.write_text("".join(lines[:3]))
    out = {"fixed-rule": (tmp_path / "t.parquet", tmp_path / "t.csv")}
    with pytest.raises(io.DamagedFileError, match="holds 2 rows and was written with 3.*rule run_track recomputes"):
        tracks.write_track_tables([rows], out)
    assert not (tmp_path / "t.parquet").exists()
    raw = pd.DataFrame({"dataset": "s", "algorithm": "a", "base_algorithm": "a", "round": [0, 1], "position": 0,
                        "steps": 10, "update_s": 1.0, "first_update_s": 0.1, "s_per_update": 0.1})
    timing_csv = tmp_path / "timing.csv"
    io.atomic_write_csv(timing_csv, raw)
    assert len(timing.load_costs([timing_csv])) == 1
    _cut(timing_csv, timing_csv, timing_csv.stat().st_size - 3)
    with pytest.raises(io.DamagedFileError, match="ends inside a row.*rule time_updates recomputes"):
        timing.load_costs([timing_csv])


# ---- parquet: curves, ledgers, tables ---------------------------------------------------------
def test_parquet_damage_is_an_error_never_a_silent_change(job, tmp_path):
    curves = job / "seeds~0-1.curves.parquet"
    want = pd.read_parquet(curves)
    raw = curves.read_bytes()
    with pytest.raises(io.DamagedFileError, match="not a complete parquet file"):
        io.read_parquet(_cut(curves, tmp_path / "cut.parquet", len(raw) // 2))
    outcomes = {"error": 0, "same": 0}
    for i in range(4, len(raw) - 8, 7):  # flip one bit at a time, all over the file
        flipped = bytearray(raw)
        flipped[i] ^= 0x01
        (tmp_path / "flip.parquet").write_bytes(flipped)
        try:
            got = io.read_parquet(tmp_path / "flip.parquet")
        except io.DamagedFileError:
            outcomes["error"] += 1
            continue
        pd.testing.assert_frame_equal(got, want)  # a flip that reads must change nothing
        outcomes["same"] += 1
    assert outcomes["error"] > outcomes["same"], outcomes


def test_a_table_csv_is_checked_against_its_parquet_twin(tmp_path):
    frame = pd.DataFrame({"a": range(5), "b": list("vwxyz")})
    agg.write_frame(frame, tmp_path / "t.parquet", tmp_path / "t.csv")
    assert agg.check_table_csv(tmp_path / "t.csv", tmp_path / "t.parquet") == 5
    lines = (tmp_path / "t.csv").read_text().splitlines(keepends=True)
    (tmp_path / "t.csv").write_text("".join(lines[:4]))
    with pytest.raises(io.DamagedFileError, match=r"t\.csv is damaged \(it holds 3 rows, 5 expected\)"):
        agg.check_table_csv(tmp_path / "t.csv", tmp_path / "t.parquet")


def test_a_cut_track_ledger_is_an_error(prepared, tmp_path):
    spec = {"track": "fixed-rule", "dataset": "synthetic", "method": "gd", "base_algorithm": "dp-gd",
            "variant": "dp-gd", "hyper": {}, "iterations": 3, "max_iterations": 3, "epsilon": 1.0, "eps_label": "1",
            "delta": None, "repetitions": [0, 1], "conversion": "bs16"}
    rows = tmp_path / "eps~1.csv"
    tracks.run_track_job(prepared, spec, rows)
    ledger = tmp_path / "eps~1.ledger.parquet"
    assert len(tracks.read_track_ledger(rows)) == 2 * 3
    _cut(ledger, ledger, ledger.stat().st_size - 1)
    with pytest.raises(io.DamagedFileError) as err:
        tracks.read_track_ledger(rows)
    assert str(err.value).startswith(f"{ledger} is damaged (not a complete parquet file: ")
    assert str(err.value).endswith(f"): delete it and {rows}, then run `snakemake {rows}` (the target before your "
                                   "other options): rule run_track recomputes both")


TABLE_FIX = "delete it and run `snakemake {}` (the target before your other options): rule aggregate recomputes it"


def test_a_cut_table_is_an_error(tmp_path):
    table = tmp_path / "best_T.parquet"
    agg.write_frame(pd.DataFrame({"a": range(5), "b": list("vwxyz")}), table)
    assert len(tables.read_table(table)) == 5
    _cut(table, table, table.stat().st_size // 2)
    with pytest.raises(io.DamagedFileError) as err:
        tables.read_table(table)
    assert re.fullmatch(rf"{re.escape(str(table))} is damaged \(not a complete parquet file: .*\): "
                        + re.escape(TABLE_FIX.format(table)), str(err.value))


def test_aggregate_reads_the_optima_verified(prepared, job, tmp_path):
    npz, js = tmp_path / "synthetic.optimum.npz", tmp_path / "synthetic.optimum.json"
    compute_optimum(prepared, npz, js)
    js.write_text(js.read_text()[:-20])
    with pytest.raises(io.DamagedFileError, match=rf"{re.escape(str(js))} is damaged \(not complete JSON"):
        tables.write_all([job / "seeds~0-1.csv"], [job / "seeds~0-1.curves.parquet"], [js], [], {}, {}, {},
                         "bs16")
    compute_optimum(prepared, npz, js)
    _cut(npz, npz, npz.stat().st_size - 1)
    with pytest.raises(io.DamagedFileError, match="its SHA-256 is not the one recorded"):
        tables.write_all([job / "seeds~0-1.csv"], [job / "seeds~0-1.curves.parquet"], [js], [], {}, {}, {},
                         "bs16")


#: a Snakemake benchmark file (Snakemake 9), two repeats; '-' where a measure was unavailable
BENCHMARK = ("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
             "1.2345\t0:00:01\t120.5\t400.0\t60.0\t80.0\t0.00\t0.01\t95.3\t1.17\n"
             "1.5000\t0:00:01\t-\t-\t-\t-\t-\t-\t-\t1.40\n")


def test_every_cut_of_a_benchmark_file_is_detected(tmp_path):
    """A benchmark file has no row count or digest: a cut one lacks its final line break or its rows,
    and one without a numeric wall time `s` is no benchmark file."""
    bench = tmp_path / "run_job" / "a.tsv"
    bench.parent.mkdir()
    bench.write_text(BENCHMARK)
    assert resources.read_benchmark(bench)["s"].tolist() == [1.2345, 1.5]
    fix = ("delete it and run snakemake again: its job then counts as one without a benchmark file (`n_missing`); "
           "`--forcerun` of the job's rule measures it again")
    raw = BENCHMARK.encode()
    second_row = raw.index(b"\n", raw.index(b"\n") + 1) + 1
    for size in [n for n in range(len(raw)) if n != second_row]:  # every cut but the one at a row boundary
        _cut(bench, tmp_path / "cut.tsv", size)
        with pytest.raises(io.DamagedFileError) as err:
            resources.summarize({"run_job": [str(tmp_path / "cut.tsv")]})
        assert str(err.value).startswith(f"{tmp_path / 'cut.tsv'} is damaged (") and str(err.value).endswith(fix)
    assert resources.read_benchmark(_cut(bench, tmp_path / "one.tsv", second_row))["s"].tolist() == [1.2345]
    (tmp_path / "bad.tsv").write_text(BENCHMARK.replace("1.5000", "x"))
    with pytest.raises(io.DamagedFileError, match=r"bad\.tsv is damaged \(a wall time `s` is not a number\)"):
        resources.read_benchmark(tmp_path / "bad.tsv")
    (tmp_path / "nos.tsv").write_text(BENCHMARK.replace("s\th:m:s", "wall\th:m:s"))
    with pytest.raises(io.DamagedFileError, match=r"nos\.tsv is damaged \(its header has no wall-time column `s`"):
        resources.read_benchmark(tmp_path / "nos.tsv")


def test_the_claims_bundle_reads_its_inputs_verified(job, tmp_path):
    """A cut runs table or protocol stops rule publish_claims before it writes anything."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "claims.md").write_text("# report\n")
    runs = src / "runs.parquet"
    agg.write_frame(agg.load_rows([job / "seeds~0-1.csv"]), runs)
    protocol = src / "protocol.json"
    io.atomic_write_json(protocol, {"config_hash": "abc", "variants": {}})
    out = tmp_path / "figures"
    args = (str(src / "claims.md"), [], str(protocol), str(runs), str(out / "claims.md"), str(out / "claims"))
    _cut(runs, runs, runs.stat().st_size - 1)
    with pytest.raises(io.DamagedFileError, match=rf"runs\.parquet is damaged \(not a complete parquet file.*"
                                                  rf"{re.escape(TABLE_FIX.format(runs))}$"):
        write_bundle(*args)
    protocol.write_text(protocol.read_text()[:10])
    with pytest.raises(io.DamagedFileError, match=rf"protocol\.json is damaged \(not complete JSON.*"
                                                  rf"{re.escape(TABLE_FIX.format(protocol))}$"):
        write_bundle(*args)
    assert not out.exists()


# ---- the cached optimum -----------------------------------------------------------------------
def test_the_optimum_is_byte_reproducible(prepared, tmp_path):
    a = compute_optimum(prepared, tmp_path / "a.npz", tmp_path / "a.json")
    b = compute_optimum(prepared, tmp_path / "b.npz", tmp_path / "b.json")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert a == b and a["npz_sha256"] == io.file_sha256(tmp_path / "a.npz")


def _fresh_cache(prepared, tmp_path) -> tuple[Path, Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    copy = data / "synthetic.npz"
    shutil.copy(prepared, copy)
    shutil.copy(prepared.with_suffix(".json"), data / "synthetic.json")
    load_problem_from_prepared(copy)  # computes the cache
    return copy, *optimum_paths(copy)


def test_a_truncated_optimum_is_an_error_not_a_bad_zip(prepared, tmp_path):
    copy, npz, js = _fresh_cache(prepared, tmp_path)
    good = load_problem_from_prepared(copy)
    _cut(npz, npz, npz.stat().st_size // 2)
    with pytest.raises(io.DamagedFileError) as err:
        load_problem_from_prepared(copy)
    assert str(err.value) == (f"{npz} is damaged (its SHA-256 is not the one recorded in synthetic.optimum.json "
                              f"when both were written): {optimum_fix(npz, js)}")
    assert optimum_fix(npz, js).startswith(f"delete {npz} and {js}, then run `snakemake {npz}`")
    js.write_text(js.read_text()[:40])
    with pytest.raises(io.DamagedFileError, match=r"synthetic\.optimum\.json is damaged \(not complete JSON"):
        load_problem_from_prepared(copy)
    npz.unlink()
    js.unlink()
    again = load_problem_from_prepared(copy)  # the fix: delete both, the next load recomputes them
    assert again.loss_opt == good.loss_opt and np.array_equal(again.w_opt, good.w_opt)


def test_an_optimum_cache_from_before_the_checksum_is_still_read_and_checked(prepared, tmp_path):
    copy, npz, js = _fresh_cache(prepared, tmp_path)
    meta = json.loads(js.read_text())
    del meta["npz_sha256"], meta[io.JSON_DIGEST_KEY]   # written before either existed
    js.write_text(json.dumps(meta))
    with np.load(npz) as f:
        w, loss = f["w"], f["loss"]
    np.savez(npz, w=w, loss=loss)  # written as before: numpy's own savez, with its time stamps
    assert load_problem_from_prepared(copy).loss_opt == float(loss)
    np.savez(npz, w=w[:-1], loss=loss)
    with pytest.raises(io.DamagedFileError, match=rf"optimum\.npz is damaged \(w\* has shape \({len(w) - 1},\), "
                                                  rf"synthetic\.optimum\.json says d = {len(w)}\)"):
        load_problem_from_prepared(copy)
    np.savez(npz, w=w, loss=loss + 1e-3)
    with pytest.raises(io.DamagedFileError, match=r"loss\* = .*, synthetic\.optimum\.json says"):
        load_problem_from_prepared(copy)
    _cut(npz, npz, npz.stat().st_size - 10)
    with pytest.raises(io.DamagedFileError, match="not a complete npz file"):
        load_problem_from_prepared(copy)


# ---- checkpoints ------------------------------------------------------------------------------
def test_a_checkpoint_that_fails_its_digest_is_recomputed(tmp_path, caplog):
    key = {"config_hash": "abc", "seed": 0, "iterations": [1, 2]}
    unit = {"rows": [{"seed": 0, "excess_loss": 0.125}], "curves": [], "seconds": 1.5, "ledger": []}
    path = tmp_path / "round0_seed0.pkl"
    jobs.save_checkpoint(path, key, unit)
    assert jobs.load_checkpoint(path, key) == unit
    saved = pd.read_pickle(path)
    body = bytearray(saved["body"])
    i = bytes(body).index(struct.pack(">d", 0.125))  # the pickled excess loss (a big-endian double)
    body[i + 7] ^= 0x01  # 0.125 -> 0.12500000000000003: still a valid pickle, another number
    assert pickle.loads(bytes(body))["rows"][0]["excess_loss"] != 0.125
    pd.to_pickle({**saved, "body": bytes(body)}, path)
    with caplog.at_level(logging.WARNING, logger="dpnewton.pipeline"):
        assert jobs.load_checkpoint(path, key) is None
    assert f"ignoring damaged checkpoint {path} (its contents do not match the SHA-256" in caplog.text


# ---- the workflow: stop before any job, delete nothing; the documented fix --------------------
def _state(workdir: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under results/: (mtime in ns, bytes)."""
    return {str(p.relative_to(workdir)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted((workdir / "results").rglob("*")) if p.is_file()}


def _damaged_copy(tmp_path_factory, name: str, relpath: str) -> tuple[Path, Path]:
    """A copy of the reference run (modification times kept) with ``relpath`` cut in half."""
    workdir = tmp_path_factory.mktemp(name)
    shutil.copytree(reference_run(tmp_path_factory), workdir, symlinks=True, dirs_exist_ok=True)
    target = workdir / relpath
    _cut(target, target, target.stat().st_size // 2)
    return workdir, target


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(snakemake_cmd(workdir, *args), cwd=REPO, capture_output=True, text=True, timeout=600,
                          env=env())


def _make(workdir: Path, target: str) -> subprocess.CompletedProcess:
    """``snakemake <target>``, the target first (before --configfile, which takes several values)."""
    cmd = [sys.executable, "-m", "snakemake", target, "--cores", "1", "--directory", str(workdir),
           "--configfile", str(workdir / "cfg.yaml")]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env())


def _ran(log: str) -> dict[str, int]:
    """Snakemake's job stats: rule -> jobs run (the table between "Job stats:" and its total)."""
    table = log.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def _stopped_with(res: subprocess.CompletedProcess, message: str) -> None:
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert f"{message} (nothing was run or deleted)" in [line.strip() for line in out.splitlines()], out[-3000:]
    assert "Finished jobid" not in out and "Removing output files" not in out


@pytest.mark.slow
def test_a_damaged_optimum_stops_the_workflow_and_its_fix_reruns_nothing(tmp_path_factory):
    relpath = "results/data/synthetic.optimum.npz"
    workdir, npz = _damaged_copy(tmp_path_factory, "damaged_optimum", relpath)
    js = npz.with_name("synthetic.optimum.json")
    damaged = _state(workdir)
    _stopped_with(_snakemake(workdir), f"{relpath} is damaged (its SHA-256 is not the one recorded in "
                                       f"synthetic.optimum.json when both were written): "
                                       f"{optimum_fix(Path(relpath), Path(relpath).with_name(js.name))}")
    assert _state(workdir) == damaged  # the runs, tracks and timings that read it are all still there
    npz.unlink()
    js.unlink()
    made = _make(workdir, relpath)
    assert made.returncode == 0 and "Job stats:" in made.stdout + made.stderr, made.stderr[-3000:]
    log = made.stdout + made.stderr
    assert _ran(log) == {"optimum": 1}, log[-3000:]
    reference = reference_run(tmp_path_factory)
    for p in (npz, js):  # byte for byte: Snakemake's input checksums match, no reader reruns
        assert p.read_bytes() == (reference / "results/data" / p.name).read_bytes()
    dry = _snakemake(workdir, "-n")
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr, dry.stderr[-3000:]


@pytest.mark.slow
def test_a_damaged_run_file_stops_the_workflow_and_its_fix_restores_the_tables(tmp_path_factory):
    relpath = "results/runs/synthetic/dp-gd/bs16/eps~1/seeds~0-1.csv"
    workdir, rows = _damaged_copy(tmp_path_factory, "damaged_rows", relpath)
    damaged = _state(workdir)
    _stopped_with(_snakemake(workdir), f"{relpath} is damaged (it ends inside a row: the file was cut short): "
                                       f"delete it and run `snakemake {relpath}` (the target before your other "
                                       f"options): rule run_job recomputes it")
    assert _state(workdir) == damaged  # the tables made from the intact file are still there
    rows.unlink()
    made = _make(workdir, relpath)
    log = made.stdout + made.stderr
    assert made.returncode == 0 and _ran(log) == {"run_job": 1}, log[-3000:]
    final = _snakemake(workdir)  # the new rows are newer: rule aggregate remakes the tables
    assert final.returncode == 0 and _ran(final.stdout + final.stderr) == {"aggregate": 1}, final.stderr[-3000:]
    assert table_differences(reference_run(tmp_path_factory), workdir) == []


def _flip_inside(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    path.write_bytes(raw)


RUNS = "results/runs/synthetic/dp-gd/bs16/eps~1/seeds~0-1.csv"
#: the reported cases: (file, how it is damaged, the start check's problem)
CHANGES = {
    "digit": (RUNS, lambda p: _changed(p, p, "excess_loss", 1, "5" + p.read_text().splitlines()[1].split(",")[
        p.read_text().splitlines()[0].split(",").index("excess_loss")][1:]),
        "its contents do not match the SHA-256 in its file_sha256 column: a value was changed after it was written"),
    "not_a_number": (RUNS, lambda p: _changed(p, p, "runtime_s", 2, "fast"),
                     "its contents do not match the SHA-256 in its file_sha256 column: a value was changed after it "
                     "was written"),
    "prepared_flip": ("results/data/synthetic.npz", _flip_inside,
                      "its SHA-256 is not the one recorded in synthetic.json when both were written"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CHANGES))
def test_a_changed_file_stops_the_workflow_and_deletes_nothing(tmp_path_factory, case):
    """One changed digit, a word in a number column (it made rule aggregate delete its 23 tables before
    it failed) and bytes flipped inside a prepared file (rule optimum deleted the cached optimum): the
    start check names the file and the fix, and nothing is run or deleted."""
    relpath, damage, problem = CHANGES[case]
    workdir = tmp_path_factory.mktemp(f"changed_{case}")
    shutil.copytree(reference_run(tmp_path_factory), workdir, symlinks=True, dirs_exist_ok=True)
    damage(workdir / relpath)
    damaged = _state(workdir)
    fix = (prepared_fix(Path(relpath)) if relpath.endswith(".npz") else f"delete it and run `snakemake {relpath}` "
           "(the target before your other options): rule run_job recomputes it")
    _stopped_with(_snakemake(workdir), f"{relpath} is damaged ({problem}): {fix}")
    assert _state(workdir) == damaged


def test_a_changed_value_in_an_optimum_or_prepared_sidecar_is_an_error(prepared, tmp_path):
    """The JSON files carry their own digest: a held-out metric or a label count changed by hand is damage."""
    copy, npz, js = _fresh_cache(prepared, tmp_path)
    meta = json.loads(js.read_text())
    js.write_text(json.dumps({**meta, "n": meta["n"] + 1}))
    with pytest.raises(io.DamagedFileError, match=r"synthetic\.optimum\.json is damaged \(its contents do not match "
                                                  r"the SHA-256 in its json_sha256 field"):
        load_problem_from_prepared(copy)
    side = copy.with_suffix(".json")
    meta = json.loads(side.read_text())
    side.write_text(json.dumps({**meta, "label_counts": {"-1": 1, "+1": 2}}))
    with pytest.raises(io.DamagedFileError, match=r"synthetic\.json is damaged \(its contents do not match"):
        check_prepared_file(copy)
