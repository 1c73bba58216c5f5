"""The results browser (dpnewton.pipeline.browser): its tie sets by hand, and the page in a real headless
Chromium (Debian's chromium + chromedriver through selenium, nothing downloaded), loaded from file://.

The browser tests skip only when Chromium is absent outside CI; under CI (env CI=true) a missing
browser fails (.ci/run installs it)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import Select

from dpnewton.algorithms import ALGORITHMS
from dpnewton.pipeline.browser import build, method_note, tie_sets

REPO = Path(__file__).resolve().parents[2]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def test_tie_sets_known_answer():
    # the claims report's rule (Welch over 4 seeds). Cell (a, bs16, 1): lowest m1 0.10 (se 0.01); m2 0.113
    # (se 0.01): t = 0.92, p ~ 0.39, a tie; m3 0.16 (se 0.001): t = 5.97 on ~3 degrees of freedom, p < 0.01,
    # not; m4 NaN is in no tie set; dp-gd-oracle (a non-private step) is lowest but never ranked. Cell
    # (a, bs16, 10) is its own: m1 is lowest there alone.
    best = pd.DataFrame({"dataset": "a", "conversion": "bs16", "epsilon": [1.0, 1.0, 1.0, 1.0, 1.0, 10.0, 10.0],
                         "algorithm": ["m1", "m2", "m3", "m4", "dp-gd-oracle", "m1", "m2"],
                         "excess_loss_mean": [0.10, 0.113, 0.16, np.nan, 0.01, 0.01, 0.05],
                         "excess_loss_se": [0.01, 0.01, 0.001, 0.01, 0.001, 0.001, 0.001], "n_seeds": 4})
    out = tie_sets(best)
    assert out["is_best"].tolist() == [True, False, False, False, False, True, False]
    assert out["tie"].tolist() == [True, True, False, False, False, True, False]
    assert out["ranked"].tolist() == [True, True, True, True, False, True, True]
    p = stats.ttest_ind_from_stats(0.10, 0.01 * 2, 4, 0.113, 0.01 * 2, 4, equal_var=False).pvalue
    q = stats.ttest_ind_from_stats(0.10, 0.01 * 2, 4, 0.16, 0.001 * 2, 4, equal_var=False).pvalue
    assert p > 0.05 > q


def test_non_private_parts_and_caveats_come_from_the_cards():
    assert method_note("dp-gd-oracle") == f"non-private step: {ALGORITHMS['dp-gd-oracle'].nonprivate}"
    assert method_note("damped-newton").startswith("non-private step: damped step size")
    assert method_note("cubic-newton") == f"caveat: {ALGORITHMS['cubic-newton'].loss_note}"
    assert method_note("dp-gd") == "" and method_note("not-registered") == ""


def test_bad_input_names_the_problem(tmp_path, capsys):
    from dpnewton.pipeline.browser import main

    table = tmp_path / "best_T.csv"
    pd.DataFrame({"dataset": ["a"], "algorithm": ["m"]}).to_csv(table, index=False)
    with pytest.raises(SystemExit):
        main(["--best-T", str(table), "--out", str(tmp_path / "x.html")])
    assert "no column conversion, epsilon, best_T, excess_loss_mean, excess_loss_se" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--best-T", str(tmp_path / "absent.csv"), "--out", str(tmp_path / "x.html")])
    assert "absent.csv: no such file" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def _chromium_or_skip():
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} or {CHROMEDRIVER} is missing in CI: .ci/run installs Debian's chromium "
                        "and chromium-driver")
        pytest.skip("Debian's chromium and chromium-driver are not installed "
                    "(apt-get install chromium chromium-driver)")


def test_missing_browser_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setitem(globals(), "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="missing in CI"):
        _chromium_or_skip()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _chromium_or_skip()


@pytest.fixture(scope="module")
def browser():
    _chromium_or_skip()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # every network request goes to a closed port and fails with a console error: the page must need none
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1800", "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _tables(tmp_path: Path) -> dict:
    """Two datasets, two epsilons, three configurations, T in {1, 2, 4}: summary, best_T and claims CSVs."""
    rows = []
    for ds in ("d1", "d2"):
        for eps in (0.1, 1.0):
            for k, algo in enumerate(["dp-gd", "hess-clip", "qu-clip"]):
                if ds == "d2" and algo == "qu-clip":
                    continue
                for T in (1, 2, 4):
                    rows.append({"dataset": ds, "algorithm": algo, "conversion": "bs16", "epsilon": eps,
                                 "iterations": T, "excess_loss_mean": (1 + k) / (T * eps * 10) + 0.01 * T,
                                 "excess_loss_se": 0.001, "runtime_s_mean": 0.01 * T * (k + 1)})
    summary = pd.DataFrame(rows)
    best = summary.loc[summary.groupby(["dataset", "algorithm", "conversion", "epsilon"])["excess_loss_mean"].idxmin()]
    best = best.rename(columns={"iterations": "best_T"}).assign(base_algorithm=lambda d: d["algorithm"],
                                                                hyper="{}", n_seeds=2, at_edge=False)
    claims = pd.DataFrame({"claim": ["C1 best excess loss", "C2 faster"], "setting": "a", "conversion": "bs16",
                           "dataset": ["d1", "all"], "paper": "p", "ours": "o",
                           "verdict": ["reproduced", "partly"], "reason": "r"})
    paths = {}
    for name, frame in (("summary", summary), ("best_T", best), ("claims", claims)):
        paths[name] = tmp_path / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


def _console_errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _points(driver, plot: str) -> list[int]:
    """Points per drawn trace of a plot (Plotly keeps the traces on the div's .data)."""
    return driver.execute_script(f"return document.getElementById('{plot}').data.map(t => t.x.length)")


def _select(driver, element: str, value: str) -> None:
    Select(driver.find_element("id", element)).select_by_value(value)


def test_page_loads_offline_and_filters_redraw(browser, tmp_path):
    paths = _tables(tmp_path)
    page = build(tmp_path / "browser.html", paths["best_T"], summary=paths["summary"], claims=paths["claims"])
    text = page.read_text()
    assert "<script src" not in text and "<link" not in text
    browser.get(page.as_uri())
    assert _console_errors(browser) == []
    # d1 at eps 0.1 (the first dataset, the smallest epsilon): three configurations, each a 3-point curve
    # and a 1-point best-T trace, plus the tie-set trace
    before = _points(browser, "plot-T")
    assert len(before) == 3 * 2 + 1 and sum(before[:-1]) == 3 * (3 + 1)
    assert _points(browser, "plot-runtime") == before
    assert "C1 best excess loss" in browser.find_element("id", "claims-table").text
    # d2 has two configurations: fewer traces, fewer points; its claims are only the "all" row
    _select(browser, "dataset", "d2")
    after = _points(browser, "plot-T")
    assert len(after) == 2 * 2 + 1 and sum(after[:-1]) == 2 * (3 + 1)
    assert "C1 best excess loss" not in browser.find_element("id", "claims-table").text
    # deselecting a configuration removes its two traces
    Select(browser.find_element("id", "methods")).deselect_by_value("dp-gd")
    assert len(_points(browser, "plot-T")) == 1 * 2 + 1
    # another epsilon redraws other values
    y_before = browser.execute_script("return document.getElementById('plot-T').data[0].y")
    _select(browser, "epsilon", "1")
    assert browser.execute_script("return document.getElementById('plot-T').data[0].y") != y_before
    assert _console_errors(browser) == []


def test_committed_page_loads_and_filters(browser):
    """docs/results.html, built from the committed claims tables (figures/claims/): best-T points only."""
    page = REPO / "docs" / "results.html"
    assert page.stat().st_size < 6e6
    browser.get(page.as_uri())
    assert _console_errors(browser) == []
    before = _points(browser, "plot-T")
    assert sum(before) > 0
    _select(browser, "dataset", "adult")
    methods = Select(browser.find_element("id", "methods"))
    shown = len(methods.all_selected_options)
    browser.find_element("id", "all").click()
    assert len(methods.all_selected_options) == len(methods.options) > shown
    assert len(_points(browser, "plot-T")) > len(before)
    assert "C1" in browser.find_element("id", "claims-table").text
    # the non-private parts are labelled wherever the results are: under the plots and in the table
    assert "non-private step: damped step size" in browser.find_element("id", "method-notes").text
    table = browser.find_element("id", "best-table").text
    assert "not ranked (non-private)" in table and "non-private step: damped step size" in table
    _select(browser, "epsilon", "0.1")  # the Oracle ran at 0.1 and 10
    browser.find_element("id", "all").click()
    assert "non-private step: line-search step size" in browser.find_element("id", "method-notes").text
    assert "Best T is selected non-privately" in browser.find_element("tag name", "body").text
    assert _console_errors(browser) == []


def test_a_page_that_needs_the_network_logs_an_error(browser, tmp_path):
    """The check above can fail: a script from the network does not load here and is reported."""
    page = tmp_path / "online.html"
    page.write_text('<!DOCTYPE html><html><head><script src="https://cdn.plot.ly/plotly-3.0.0.min.js"></script>'
                    "</head><body></body></html>")
    browser.get(page.as_uri())
    assert _console_errors(browser)
