"""Stable hashes and labels of the plan: config hashes, epsilon path labels, seed lists and chunks."""

from __future__ import annotations

import hashlib
import json


def config_hash(obj) -> str:
    """First 12 hex digits of sha256 over canonical JSON (sorted keys; keys as strings, so a YAML
    mapping that mixes ``10:`` and ``"0.5":`` keys hashes too)."""
    text = json.dumps(_string_keys(obj), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _string_keys(obj):
    if isinstance(obj, dict):
        return {str(k): _string_keys(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_string_keys(v) for v in obj]
    return obj



def eps_label(epsilon: float) -> str:
    """Path label of an epsilon: 0.01 -> '0.01', 1.0 -> '1', 10 -> '10' (round-trips via float)."""
    label = f"{float(epsilon):g}"
    if float(label) != float(epsilon):
        label = repr(float(epsilon))
    return label


def seed_list(seeds) -> list[int]:
    """``seeds`` is a count (seeds 0..k-1) or an explicit list of distinct non-negative ints."""
    if isinstance(seeds, int):
        return list(range(seeds))
    out = [int(s) for s in seeds]
    if len(set(out)) != len(out):
        raise ValueError(f"seeds {out} contain duplicates")
    return out


def seed_chunks(seeds: list[int], per_job: int | None) -> list[tuple[str, list[int]]]:
    """Split seeds into contiguous chunks of ``per_job`` (None: one chunk); label 'first-last'."""
    size = len(seeds) if not per_job else int(per_job)
    chunks = [seeds[i:i + size] for i in range(0, len(seeds), size)]
    return [(f"{c[0]}-{c[-1]}", c) for c in chunks]
