"""The 31 bad inputs and faults a review reported (12 tracebacks, 3 hangs, 8 silent results, 8 unclear
messages; the cases it did not name are reconstructed from their category), each in one place: every
case ends in one clear error naming the problem and the fix, raised before any large allocation and
within seconds (the caps are checked up front, so no case runs long), or in a correct result. Two named
faults (a non-numeric value in a run CSV, bytes flipped inside a prepared dataset) also check that
nothing valid is deleted."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpnewton
from dpnewton import DPLogisticRegression
from dpnewton import io as dio
from dpnewton.data.prepare import check_prepared_file, prepare, sidecar_path
from dpnewton.pipeline import aggregate as agg
from dpnewton.pipeline import tables, timing, tracks
from dpnewton.pipeline.resources import write_resources
from dpnewton.problems import check_optimum, compute_optimum, optimum_paths

from tests.pipeline.test_config_checks import _load
from tests.test_bad_inputs import cli, deadline, refused, run_args, write_csv

pytestmark = [pytest.mark.filterwarnings("ignore::dpnewton.estimator.PrivacyWarning"),
              pytest.mark.filterwarnings("ignore::dpnewton.estimator.BudgetWarning")]

RNG = np.random.default_rng(0)
X = RNG.standard_normal((60, 3))
Y = (X[:, 0] > 0).astype(int)
SIGNS = 2.0 * Y - 1   # dpnewton.fit takes labels -1/+1
CAP = "above the cap of 1,000,000"
GD = {"algorithm": "dp-gd", "hyper": {"average": "tail"}}


def raises_within(seconds, call, *needles, error=ValueError):
    """``call()`` raises ``error`` within ``seconds`` with every needle in its one-line message."""
    with deadline(seconds), pytest.raises(error) as err:
        call()
    message = str(err.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


# ------------------------------------------------------------------ tracebacks (12)
def test_estimator_with_iterations_10_to_the_12_is_refused_before_allocating():
    raises_within(2, lambda: DPLogisticRegression(iterations=10**12, **GD).fit(X, Y), "iterations=1000000000000",
                  CAP, "use fewer iterations")


def test_library_fit_with_iterations_10_to_the_12_is_refused():
    raises_within(2, lambda: dpnewton.fit(X, SIGNS, "dp-gd", 1.0, iterations=10**12), CAP, "use fewer iterations")


def test_cli_with_T_10_to_the_12_is_refused(tmp_path, capsys):
    refused(cli(capsys, *run_args(write_csv(tmp_path / "d.csv"), tmp_path / "cache", T=10**12), seconds=5), CAP)


def test_objpert_at_epsilon_300_fits_a_correct_model():
    model = DPLogisticRegression(epsilon=300, random_state=0).fit(X, Y)
    assert np.all(np.isfinite(model.coef_)) and np.isfinite(model.intercept_).all()
    assert model.score(X, Y) > 0.9   # the label is the sign of the first feature: little noise at epsilon 300


# Seven values the plan check used to accept and a job then failed on; the config load refuses each,
# naming its key and the fix.
CONFIG_ERRORS = [
    ({"algorithms__dp-gd__iterations": [10**7]}, ["algorithms.dp-gd", "T = 10,000,000", CAP, "smaller T grid"]),
    ({"algorithms__dp-gd__max_iterations": 10**7}, ["algorithms.dp-gd", CAP]),
    ({"algorithms__hess-clip__hyper": {"grad_frac": 1.5}}, ["algorithms.hess-clip.hyper", "correct it"]),
    ({"datasets__synthetic__options": {"n": 200, "dims": 4}}, ["datasets.synthetic.options", "correct or remove"]),
    ({"holdout": 0.998}, ["holdout", "both splits"]),
    ({"seeds": [2**63]}, ["seeds", "2**63 - 1", "smaller seeds"]),
    ({"algorithms__aop": {"iterations": [1, 10]}}, ["algorithms.aop", "set iterations: [1]"]),
]


@pytest.mark.parametrize("changes, needles", CONFIG_ERRORS, ids=[next(iter(c)) for c, _ in CONFIG_ERRORS])
def test_config_values_a_job_would_fail_on_are_refused_at_load(changes, needles):
    message = raises_within(30, lambda: _load(**changes), *needles)
    assert message.startswith("config key "), message


def test_a_misspelled_claims_role_is_refused_at_load():
    raises_within(30, lambda: _load(claims={"enabled": True, "baseline": "dp_gd"}),
                  "config key claims.baseline", "['dp_gd']", "correct the name")


# ------------------------------------------------------------------ hangs (3): caps checked up front
@pytest.mark.parametrize("algorithm", ["dp-gd", "precond-dp-gd"])
def test_cli_T_10_to_the_7_is_refused_up_front(tmp_path, capsys, algorithm):
    cache = tmp_path / "cache"
    refused(cli(capsys, *run_args(write_csv(tmp_path / "d.csv"), cache, algorithm=algorithm, T=10**7), seconds=5),
            "iterations=10000000", CAP)
    assert not cache.exists()


def test_estimator_iterations_10_to_the_8_is_refused_up_front():
    raises_within(2, lambda: DPLogisticRegression(iterations=10**8, **GD).fit(X, Y), CAP)


# ------------------------------------------------------------------ unclear messages (8): epsilon 1e308
OVERFLOW = ["floating point", "smaller epsilon"]


@pytest.mark.parametrize("params", [{}, GD | {"iterations": 5}, {"algorithm": "precond-dp-gd", "iterations": 5}],
                         ids=["objpert", "dp-gd", "precond-dp-gd"])
def test_estimator_epsilon_1e308_names_the_overflow_and_the_fix(params):
    message = raises_within(2, lambda: DPLogisticRegression(epsilon=1e308, **params).fit(X, Y), *OVERFLOW)
    assert "f(a) and f(b)" not in message


def test_library_fit_epsilon_1e308_names_the_overflow_and_the_fix():
    message = raises_within(2, lambda: dpnewton.fit(X, SIGNS, "dp-gd", 1e308, iterations=5, conversion="gdp"),
                            "epsilon=1e+308", *OVERFLOW)
    assert "f(a) and f(b)" not in message


def test_cli_run_epsilon_1e308_is_named_or_accounted(tmp_path, capsys):
    """Under gdp the conversion overflows and says so; under bs16 the run is a correct one: its rho, CKS
    epsilon and ledger agree (no noise is left at such a budget, and the record shows it)."""
    data, cache = write_csv(tmp_path / "d.csv"), tmp_path / "c"
    line = refused(cli(capsys, *run_args(data, cache, "--conversion", "gdp", epsilon=1e308), seconds=5),
                   "epsilon=1e+308", *OVERFLOW)
    assert "f(a) and f(b)" not in line
    code, out, err = cli(capsys, *run_args(data, cache, epsilon=1e308), seconds=10)
    assert code == 0, err
    record = json.loads(out)
    assert math.isfinite(record["rho"]) and record["rho"] > 1e300
    assert record["ledger_rho_total"] == pytest.approx(record["rho"], rel=1e-9)
    assert not record["conversion_failed"]


def test_cli_conversions_epsilon_1e308_names_the_overflow(capsys):
    line = refused(cli(capsys, "conversions", "--epsilon", "1e308", "--delta", "1e-5", seconds=5), *OVERFLOW)
    assert "f(a) and f(b)" not in line


@pytest.mark.parametrize("changes, key", [({"epsilons": [1e308]}, "epsilons"),
                                          ({"timing": {"epsilon": 1e308}}, "timing.epsilon")])
def test_config_epsilon_1e308_is_refused_at_load(changes, key):
    message = raises_within(30, lambda: _load(**changes), f"config key {key}", "smaller epsilon")
    assert "f(a) and f(b)" not in message


# ------------------------------------------------------------------ silent results (8): one changed digit
def change_one_digit(path: Path) -> None:
    """Replace one digit of the file's text (the last digit before its final 60 characters) by another."""
    text = path.read_text()
    i = max(j for j, ch in enumerate(text[:-60]) if ch.isdigit())
    path.write_text(text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1:])


def damaged(path, read, named=None):
    """``read(path)`` raises DamagedFileError naming ``named`` (default: ``path``) and the fix."""
    with pytest.raises(dio.DamagedFileError) as err:
        read(path)
    assert err.value.path == str(named or path) and "delete" in str(err.value), str(err.value)
    return str(err.value)


FRAME = pd.DataFrame({"dataset": ["a", "a"], "algorithm": ["dp-gd", "dp-gd"], "eps_label": ["1", "1"],
                      "excess_loss": [0.125, 0.25], "seed": [0, 1]})


def test_run_csv_with_one_changed_digit_is_refused(tmp_path):
    path = tmp_path / "seeds~0-1.csv"
    dio.atomic_write_csv(path, FRAME)
    change_one_digit(path)
    assert "a value was changed" in damaged(path, agg.read_rows)


def test_track_rows_with_one_changed_digit_are_refused(tmp_path):
    path = tmp_path / "eps~1.csv"
    dio.atomic_write_csv(path, FRAME)
    change_one_digit(path)
    damaged(path, tracks.read_track_rows)


def test_timing_csv_with_one_changed_digit_is_refused(tmp_path):
    path = tmp_path / "synthetic.csv"
    dio.atomic_write_csv(path, FRAME)
    change_one_digit(path)
    damaged(path, lambda p: timing.load_costs([p]))


def test_protocol_json_with_one_changed_digit_is_refused(tmp_path):
    path = tmp_path / "protocol.json"
    dio.atomic_write_json(path, {"epsilons": [0.5, 1.0], "n_runs": 120, "config_hash": "abc"}, digest=True)
    assert dio.read_json(path)["n_runs"] == 120
    path.write_text(path.read_text().replace("120", "121"))
    assert "json_sha256" in damaged(path, dio.read_json)


def test_table_csv_mirror_with_one_changed_digit_is_refused(tmp_path):
    pq, csv = tmp_path / "summary.parquet", tmp_path / "summary.csv"
    agg.write_frame(FRAME, pq, csv)
    assert agg.check_table_csv(csv, pq) == 2
    csv.write_text(csv.read_text().replace("0.25", "0.35"))
    assert "SHA-256" in damaged(csv, lambda p: agg.check_table_csv(p, pq))


@pytest.mark.parametrize("writer", ["resources", "tracks"])
def test_the_resources_and_tracks_tables_record_their_mirror_digest(tmp_path, writer):
    """Both now write through write_frame, so their CSV mirrors are checked like the aggregate tables."""
    pq, csv = tmp_path / "t.parquet", tmp_path / "t.csv"
    if writer == "tracks":
        tracks.write_track_tables([], {"private-selection": (pq, csv)})
    else:
        write_resources({"run_job": []}, pq, csv)
    assert dio.parquet_footer(pq, dio.CSV_DIGEST_KEY) == dio.file_sha256(csv)


def test_table_parquet_with_one_changed_value_is_refused(tmp_path):
    path = tmp_path / "best_T.parquet"
    agg.write_frame(FRAME, path)
    raw = bytearray(path.read_bytes())
    i = raw.find(np.float64(0.25).tobytes())
    raw[i + 7] ^= 0x01
    path.write_bytes(bytes(raw))
    damaged(path, tables.read_table)


@pytest.fixture
def prepared(tmp_path):
    return Path(prepare("synthetic", cache_dir=tmp_path / "data", n=50, d=3, seed=0).path)


def test_prepared_sidecar_with_one_changed_digit_is_refused(prepared):
    side = sidecar_path(prepared)
    meta = json.loads(side.read_text())
    meta["n"] = meta["n"] + 1
    side.write_text(json.dumps(meta))
    damaged(prepared, check_prepared_file, named=side)


def test_optimum_summary_with_one_changed_digit_is_refused(prepared):
    npz, js = optimum_paths(prepared)
    compute_optimum(prepared, npz, js)
    summary = json.loads(js.read_text())
    summary["loss_opt"] = summary["loss_opt"] * 1.001
    js.write_text(json.dumps(summary))
    with pytest.raises(dio.DamagedFileError, match="delete"):
        check_optimum(npz, js)


# ------------------------------------------------------------------ named faults: nothing valid is deleted
def test_bytes_flipped_inside_a_prepared_npz_are_refused_and_the_optimum_is_kept(prepared):
    npz, js = optimum_paths(prepared)
    compute_optimum(prepared, npz, js)
    kept = npz.read_bytes(), js.read_bytes()
    raw = bytearray(prepared.read_bytes())
    raw[len(raw) // 2] ^= 0xFF   # inside the data, the zip directory at the end intact
    prepared.write_bytes(bytes(raw))
    assert dio.check_npz(prepared)
    message = damaged(prepared, check_prepared_file)
    assert "SHA-256" in message or "sha256" in message.lower(), message
    assert (npz.read_bytes(), js.read_bytes()) == kept


def test_a_non_numeric_value_in_a_run_csv_deletes_no_table(tmp_path):
    rows = tmp_path / "seeds~0-1.csv"
    dio.atomic_write_csv(rows, FRAME.assign(excess_loss=["0.125", "abc"]))
    table = tmp_path / "summary.parquet"
    agg.write_frame(FRAME, table)
    before = table.read_bytes()
    out = {"runs_parquet": str(tmp_path / "runs.parquet"), "summary_parquet": str(table)}
    with pytest.raises(ValueError, match=str(rows)):
        tables.write_all([rows], [], [], [], out, {}, {}, "bs16")
    assert table.read_bytes() == before and not (tmp_path / "runs.parquet").exists()


def test_nan_epsilon_and_delta_are_named():
    for params, needle in (({"epsilon": math.nan}, "epsilon"), ({"delta": math.nan}, "delta")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raises_within(2, lambda: DPLogisticRegression(**params).fit(X, Y), needle)


def test_the_results_browser_reads_a_csv_table_verified(tmp_path):
    from dpnewton.pipeline.browser import read_table

    path = tmp_path / "claims.csv"
    dio.atomic_write_csv(path, FRAME)
    assert list(read_table(path)["excess_loss"]) == [0.125, 0.25]
    change_one_digit(path)
    damaged(path, read_table)


def test_the_T_cap_itself_is_accepted_at_load():
    """No false alarm: T = MAX_ITERATIONS (the cap, which a run accepts) loads."""
    from dpnewton.experiment import MAX_ITERATIONS

    _load(**{"algorithms__dp-gd": {"iterations": [2, MAX_ITERATIONS]}})


def test_a_grid_extension_stops_at_the_runs_cap():
    """A default extension cap above MAX_ITERATIONS (a grid ending at 524,288, doubled) is not stated by
    the config, so it loads; the extension then stops below the runs' cap instead of failing in the job."""
    from dpnewton.pipeline.t_search import next_extension

    grid = [262_144, 524_288]
    rows = [{"iterations": t, "excess_loss": 1.0 / t} for t in grid]   # best at the top edge
    assert next_extension(rows, grid, {"factor": 2, "max_iterations": 2**21}) == []
    assert next_extension(rows[:1] + [{"iterations": 400_000, "excess_loss": 0.0}], [262_144, 400_000],
                          {"factor": 2, "max_iterations": 2**21}) == [800_000]
