"""The card's explicit calibration and style: checked at registration against the card's other fields, and
the only thing the consumers read (the count release, the budget's composition, private selection)."""

import dataclasses
import re

import pytest

from dpnewton.algorithms import ALGORITHMS, register
from dpnewton.algorithms.registry import CALIBRATIONS, MARKERS
from dpnewton.experiment import make_contexts
from dpnewton.tuning import check_method


def test_every_built_in_card_names_a_calibration_that_agrees_with_it():
    for name, card in ALGORITHMS.items():
        assert card.calibration in CALIBRATIONS, name
        assert (card.calibration == "zcdp-plan") == (card.plan is not None) == card.zcdp, name
        assert (card.calibration == "one-shot") == (not card.iterative), name
        assert card.family and card.marker in MARKERS, name
    # the (epsilon, delta)-calibrated cards, as the docs list them
    assert {n for n, c in ALGORITHMS.items() if c.calibration == "accountant"} == {
        "dp-sgd", "minibatch-hess-clip", "minibatch-hess-add", "minibatch-qu-clip", "minibatch-qu-add"}
    assert {n for n, c in ALGORITHMS.items() if c.calibration == "one-shot"} == {"aop", "objpert"}


@pytest.mark.parametrize("original, change, reason", [
    ("dp-gd", {"calibration": ""}, "calibration=''; add calibration=..."),
    ("dp-gd", {"calibration": "rdp"}, "calibration='rdp'; add calibration=..."),
    ("dp-gd", {"calibration": "accountant"}, "calibration='accountant' contradicts its plan"),
    ("dp-sgd", {"calibration": "zcdp-plan"}, "calibration='zcdp-plan' contradicts its plan"),
    ("objpert", {"calibration": "accountant"}, "calibration 'accountant' is for an iterative method"),
    ("dp-sgd", {"calibration": "one-shot"}, "calibration 'one-shot' is for a non-iterative method"),
    ("dp-gd", {"family": ""}, "add family=..."),
    ("dp-gd", {"colour": "blue"}, "colour='blue'; add colour='#rrggbb'"),
    ("dp-gd", {"colour": "#000000"}, "kept for the figures' reference lines"),
    ("dp-gd", {"marker": "."}, "marker='.'; add marker=... one of"),
])
def test_a_card_that_leaves_out_or_contradicts_its_calibration_or_style_is_refused(original, change, reason):
    with pytest.raises(ValueError, match=re.escape("algorithm card 'copy': ") + ".*" + re.escape(reason)) as info:
        dataclasses.replace(ALGORITHMS[original], name="copy", **change)
    assert "copy" not in ALGORITHMS and str(info.value)


@pytest.fixture
def copies():
    """dp-gd's card copied as a registered plugin card, and objpert's: removed afterwards."""
    names = []
    try:
        for original in ("dp-gd", "objpert"):
            names.append(register(dataclasses.replace(ALGORITHMS[original], name=f"{original}-copy",
                                                      colour="#123456")).name)
        yield names
    finally:
        for name in names:
            ALGORITHMS.pop(name)


def test_the_count_release_and_selection_follow_the_calibration(copies):
    """Under add/remove a zCDP-planned card's runs release the row count N first (charged to the ledger);
    an (epsilon, delta)-calibrated one's do not; only a zCDP card is a candidate of a private selection."""
    for name, counts in zip(copies, (True, False)):
        (ctx,) = make_contexts("toy", name, 1.0, 1e-4, "bs16", 0.1, [(0, 1)], neighbouring="add-remove", n=500)
        assert (ctx.count is not None) == counts == ALGORITHMS[name].releases_count
        assert [e.quantity for e in ctx.ledger.entries] == (["count"] if counts else [])
    assert check_method("dp-gd-copy").name == "dp-gd-copy"
    with pytest.raises(ValueError, match="calibrated to .epsilon, delta."):
        check_method("objpert-copy")
