"""The neighbouring relation a run's guarantee is stated under, and the released row count.

Two relations, named in every run's record (``neighbouring``):

``"add-remove"`` (:data:`LIBRARY_RELATION`: ``dpnewton.fit``, ``dpnewton run`` and
``DPLogisticRegression``)
    D and D' differ by adding or removing one row, and the number of rows n is private. No noise
    scale may then be a function of n. The zCDP methods first release the count,
    N~ = n + N(0, 1/(2 rho_N)) (Gaussian mechanism, sensitivity 1: BS16 Proposition 1.6) with
    rho_N = :data:`COUNT_SHARE` x rho, and use N = max(N~, 1) (post-processing) wherever the
    paper's analysis uses n: every mean is sum / N and every sensitivity c/n becomes c/N. Adding or
    removing one row moves a sum of per-row terms of norm <= c by <= c, so sum / N moves by <= c/N
    for the same released N on both sides, and each later release is a Gaussian mechanism given N;
    zCDP composes adaptively (BS16 Lemma 2.3), so the run is rho-zCDP in total.
    Objective perturbation needs no count (its analysis is on sums, :mod:`dpnewton.algorithms.objpert`).
``"add-remove-public-n"`` (:data:`BENCHMARK_RELATION`: the pipeline, the paper's convention)
    add or remove one row with n treated as public, as in the paper's accounting [P section 6] and
    its official code: N = n, no count release. It is not a guarantee against an adversary who does
    not know n (a run on D and on D plus one row use different noise scales); the published
    reproduction uses it so that its numbers are the paper's setting.

Default delta (:func:`resolve_delta`, the one place a default delta is chosen): n^-2 under
``add-remove-public-n`` [P section 6]. Under ``add-remove`` n^-2 would read the private n, so delta
defaults to the public constant :data:`LIBRARY_DELTA` = 1e-10, at most 1/(10 n) for every
n <= :data:`LIBRARY_MAX_ROWS` = 10^9 rows (a float64 column of 10^9 rows is 8 GB: any dataset that fits
in a machine's memory). Only a relation with n public checks delta against n (:func:`check_delta_for_rows`,
delta >= 1/n allows releasing a row outright); under ``add-remove`` such a check would itself be a
membership test on the private n, so nothing about delta depends on the data there.
"""

from __future__ import annotations


LIBRARY_RELATION = "add-remove"
BENCHMARK_RELATION = "add-remove-public-n"
RELATIONS = (LIBRARY_RELATION, BENCHMARK_RELATION)
RELATION_TEXT = {
    LIBRARY_RELATION: "adding or removing one training row, with the number of rows n private "
                      "(released with noise from the budget where a method needs it)",
    BENCHMARK_RELATION: "adding or removing one training row, with the number of rows n treated as "
                        "public (the paper's convention)",
}
"""One sentence per relation: what a neighbouring pair of datasets is."""

COUNT_SHARE = 0.02
"""Share of a zCDP run's rho spent on releasing the row count under ``add-remove``."""
COUNT_SENSITIVITY = 1.0
LIBRARY_MAX_ROWS = 10**9
"""The public row count the library's default delta is chosen for (module docstring)."""
LIBRARY_DELTA = 1.0 / (10 * LIBRARY_MAX_ROWS)
"""Default delta under ``add-remove``: 1e-10 = 1/(10 N) for N = :data:`LIBRARY_MAX_ROWS`, a public
constant (n^-2 would read the private n)."""


def check_relation(relation) -> str:
    if not isinstance(relation, str) or relation not in RELATIONS:
        raise ValueError(f"neighbouring={relation!r} is unknown; choose one of {', '.join(RELATIONS)}")
    return relation


def delta_without_n(relation: str) -> float | None:
    """The default delta of ``relation`` when it needs no n (:data:`LIBRARY_DELTA` under ``add-remove``),
    else None: a run's arguments can then be checked before any data is read."""
    return LIBRARY_DELTA if check_relation(relation) == LIBRARY_RELATION else None


def paper_delta(n: int) -> float:
    """delta = n^-2, the paper's choice [P section 6, "Privacy Notion"]."""
    if n < 2:
        raise ValueError(f"n={n!r}: delta = n^-2 needs at least 2 records")
    return 1.0 / float(n) ** 2


def default_delta(relation: str, n: int) -> float:
    """delta when none is given: n^-2 with n public [P section 6], :data:`LIBRARY_DELTA` otherwise."""
    known = delta_without_n(relation)
    return paper_delta(n) if known is None else known


def resolve_delta(delta: float | None, relation: str, n: int) -> float:
    """``delta`` itself when given, else the relation's default (:func:`default_delta`)."""
    return default_delta(relation, n) if delta is None else float(delta)


def check_delta_for_rows(delta: float, n: int, relation: str) -> None:
    """Refuse delta >= 1/n when n is public (``add-remove-public-n``): such an (epsilon, delta) guarantee
    allows publishing a random row in the clear. Under ``add-remove`` n is private and nothing is checked
    (a refusal would reveal whether n >= 1/delta); the default delta there is chosen for every n up to
    :data:`LIBRARY_MAX_ROWS`."""
    if check_relation(relation) == LIBRARY_RELATION:
        return
    if delta >= 1.0 / n:
        raise ValueError(f"delta={delta!r} is at least 1/n = {1.0 / n:.3g} for n={n} rows: it allows "
                         f"releasing a row in the clear; pass a delta below 1/n, e.g. the default n^-2 = "
                         f"{paper_delta(n):.3g} (omit delta)")


def count_rho(rho: float) -> float:
    """rho_N = COUNT_SHARE x rho: the count release's share of a run's budget."""
    return COUNT_SHARE * rho


def released_count(n: int, noise: float) -> float:
    """N = max(n + noise, 1), noise = sigma xi, xi ~ N(0, 1): the noisy count, post-processed to be >= 1."""
    return float(max(n + noise, 1.0))


def relation_sentence(relation: str) -> str:
    """'with respect to ...': the guarantee's neighbouring relation in words."""
    return f"with respect to {RELATION_TEXT[check_relation(relation)]}"


__all__ = ["BENCHMARK_RELATION", "COUNT_SENSITIVITY", "COUNT_SHARE", "LIBRARY_DELTA", "LIBRARY_MAX_ROWS",
           "LIBRARY_RELATION",
           "RELATIONS", "RELATION_TEXT", "check_delta_for_rows", "check_relation", "count_rho",
           "default_delta", "delta_without_n", "paper_delta", "resolve_delta", "relation_sentence", "released_count"]
