"""A configuration's style in every figure: colour, line style, marker and legend label (:func:`method_styles`).

The colour and marker are its algorithm card's (``colour``, ``marker``: a new card never restyles another),
a shade of the colour (and another marker) per further tuning variant; the line style says how the model
is released and whether the method has a non-private step.
"""

from __future__ import annotations

import colorsys
import zlib

from matplotlib.colors import to_hex, to_rgb

from ..algorithms import ALGORITHMS
from ..algorithms.registry import MARKERS

#: an algorithm's tuning variants (configurations that differ in more than their ``average``) in turn: the
#: lightness of its card's colour (hue and saturation kept; 0 = the colour itself, -1 the darkest, 1 the
#: lightest shade, :func:`_shade`); the first variant has the card's marker, the others the next of
#: :data:`~dpnewton.algorithms.registry.MARKERS` in turn (the figures with one point per epsilon)
SHADES = (0.0, -0.5, 0.45, -0.9, 0.85, -0.25, 0.2)
#: lightness range of the shades
DARKEST, LIGHTEST = 0.2, 0.8
#: line style by release: the last iterate, an average of iterates (``average`` other than none), and the
#: the label's mark of a method whose card has a ``loss_note`` (it minimises its own objective)
OWN_OBJECTIVE = "own objective"
#: same two for a method with a non-private step (its card's role); the floor's dots are no method's
LINES = {("private", False): "-", ("private", True): "-.",
         ("non-private step", False): "--", ("non-private step", True): (0, (6, 2, 1, 2, 1, 2))}

def label(name: str) -> str:
    """A registered algorithm's card label; a configuration name (or anything else) as it is."""
    return ALGORITHMS[name].label if name in ALGORITHMS else name


def _shade(colour, amount: float) -> str:
    """``colour`` with its lightness moved the share ``amount`` of the way to :data:`DARKEST` (< 0) or to
    :data:`LIGHTEST` (> 0)."""
    h, lightness, s = colorsys.rgb_to_hls(*to_rgb(colour))
    bound = DARKEST if amount < 0 else LIGHTEST
    return to_hex(colorsys.hls_to_rgb(h, lightness + abs(amount) * (bound - lightness), s))


def card_style(name: str) -> tuple[str, str]:
    """(colour, marker) of an algorithm: its card's; a name without a card (a caller's own series) gets a
    colour and marker derived from the name alone (a stable hash), so no other series moves."""
    if name in ALGORITHMS:
        return ALGORITHMS[name].colour, ALGORITHMS[name].marker
    h = zlib.crc32(name.encode())
    return to_hex(colorsys.hls_to_rgb((h % 360) / 360.0, 0.45, 0.6)), MARKERS[h % len(MARKERS)]


def _variant_marker(marker: str, k: int) -> str:
    """The marker of an algorithm's k-th tuning variant: its card's for the first, then the others in turn."""
    others = [m for m in MARKERS if m != marker]
    return marker if k == 0 else others[(k - 1) % len(others)]


def method_styles(methods) -> dict[str, dict]:
    """Colour, line style, marker and legend label (``plot`` keywords) of each configuration, the same in every
    figure of a run, in legend order: by algorithm (registry order), then tuning variant, then release. The
    figures of curves draw no markers (:func:`curve_style`). An algorithm's colour and marker are its card's
    (:func:`card_style`): they depend on no other card.

    ``methods``: name -> {"base": its registered algorithm, "average": its release, "variant": a key equal for
    configurations that differ only in ``average``} (:func:`dpnewton.pipeline.figures.style_order`; the
    variants of an algorithm get :data:`SHADES` in the order given), or a list of names, each its own algorithm.
    A method with a non-private step is marked so in its label and dashed; one whose card has a ``loss_note``
    (its loss is not the others') is marked :data:`OWN_OBJECTIVE`."""
    if not isinstance(methods, dict):
        methods = {m: {"base": m, "average": "none", "variant": m} for m in dict.fromkeys(methods)}
    order = list(ALGORITHMS)
    order += list(dict.fromkeys(k["base"] for k in methods.values() if k["base"] not in ALGORITHMS))
    variants: dict[str, list] = {}
    for key in methods.values():
        seen = variants.setdefault(key["base"], [])
        if key["variant"] not in seen:
            seen.append(key["variant"])
    styles, rank = {}, {}
    for name, key in methods.items():
        base, averaged = key["base"], key["average"] not in ("none", None)
        role = ALGORITHMS[base].role if base in ALGORITHMS else ""
        nonprivate = role == "non-private step"
        shade = variants[base].index(key["variant"])
        colour, marker = card_style(base)
        styles[name] = {"color": _shade(colour, SHADES[shade % len(SHADES)]),
                        "ls": LINES["non-private step" if nonprivate else "private", averaged],
                        "marker": _variant_marker(marker, shade),
                        "label": label(name) + (" (non-private step)" if nonprivate else "")
                        + (f" ({OWN_OBJECTIVE})" if base in ALGORITHMS and ALGORITHMS[base].loss_note else "")}
        rank[name] = (order.index(base), shade, averaged)
    return {name: styles[name] for name in sorted(styles, key=lambda n: rank[n])}


def styles_for(styles: dict | None, names) -> dict[str, dict]:
    """``styles`` extended by any of ``names`` it lacks (a caller without the run's table), each its own
    algorithm."""
    styles = dict(styles or {})
    extra = [n for n in dict.fromkeys(names) if n not in styles]
    styles.update(method_styles(extra))
    return styles


def curve_style(style: dict) -> dict:
    """``style`` without its marker (a curve has a point per iterate or budget)."""
    return {**style, "marker": None}


def in_style_order(names, styles: dict) -> list[str]:
    """``names`` (without repeats) in legend order."""
    rank = {n: k for k, n in enumerate(styles)}
    return sorted(dict.fromkeys(names), key=lambda n: rank.get(n, len(rank)))
