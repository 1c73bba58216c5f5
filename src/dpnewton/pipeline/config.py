"""The one entry for a configuration, and the names the workflow reaches through it.

:func:`load_config` (the workflow's ``common.smk`` and the tests use it) gives ``--config`` strings
their schema type, validates against ``workflow/schemas/config.schema.yaml`` and fills the schema's
``default`` values in place (:mod:`.schema`), so the code indexes the config directly and the defaults
live only in the schema; then it runs the checks the schema cannot express. The job plan built from a
loaded config is :mod:`.plan`.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from ..algorithms import ALGORITHMS
from ..data.registry import DATASETS
from .config_checks import check_job_values

# The workflow (common.smk) and older callers use this module as the whole config API
# (``pipecfg.expand``, ``pipecfg.protocol_summary``, ...), so the schema's and the plan's public names
# are importable from here as well.
from .plan import (ALL_CONVERSIONS, STUDY_DEFAULTS, Job, Plan, algorithm_grids, config_hash,  # noqa: F401
                   configurations_per_algorithm, curve_epsilons, dataset_available, eps_label, expand,
                   extension_spec, protocol_summary, seed_chunks, seed_list, studies)
from .plan import resolve_data_dir as _repository_path
from .schema import (BOOLEAN_WORDS, SCHEMA_PATH, check_finite, coerce_cli_values, fill_defaults,  # noqa: F401
                     load_schema, validate_config, validator)


def resolve_data_dir(data_dir: str | None, base_dir: str | Path, allow_download: bool = False) -> Path | None:
    """The config's ``data_dir`` as a folder (relative to the repository ``base_dir``), or None for none.
    A folder that does not exist is None when ``allow_download``: the datasets are then downloaded and
    checked against their recorded sha256 (a fresh clone without ``../shared`` and the default
    ``data_dir``); without it, :func:`expand` names the missing folder."""
    p = _repository_path(data_dir, base_dir)
    return None if p is not None and allow_download and not p.is_dir() else p


def load_config(cfg: dict, schema: str | Path | dict | None = None, registry=None) -> dict:
    """The configuration entry: coerce ``--config`` strings, reject NaN and infinite numbers
    (:func:`.schema.check_finite`; the schema's bounds let NaN through), validate, fill the schema's
    defaults (in place) and run the checks the schema cannot express (algorithm names against the
    registry, grid references, caps, duplicate epsilons). Returns ``cfg``. Raises
    ``jsonschema.ValidationError`` whose text is one line naming the key, the value, the rule and the
    fix (:func:`.schema.validate_config`), or ``ValueError``.
    """
    schema = schema if isinstance(schema, dict) else load_schema(schema)
    coerce_cli_values(cfg, schema)
    check_finite(cfg, schema)
    validate_config(cfg, schema)
    fill_defaults(cfg, schema)
    check_config(cfg, registry)
    return cfg


def check_config(cfg: dict, registry=None) -> None:
    """The hand checks of a filled config (data availability is checked by :func:`expand`), ending with
    every value a job reads (:func:`.config_checks.check_job_values`)."""
    if registry is None:
        registry = ALGORITHMS
    labels = {eps_label(e) for e in cfg["epsilons"]}
    if len(labels) != len(cfg["epsilons"]):
        raise ValueError(f"config epsilons {cfg['epsilons']} contain duplicates")
    seed_list(cfg["seeds"])
    algorithm_grids(cfg, registry)
    check_dataset_references(cfg)
    check_job_values(cfg, registry)


def check_dataset_references(cfg: dict) -> None:
    """Every key of ``datasets`` must be a registered dataset (:data:`dpnewton.data.DATASETS`: adding one is
    one registry entry, no schema edit), and every dataset a ``conversion_study`` entry or ``tracks``
    restricts itself to must be a key of ``datasets`` (an optional dataset whose files are missing is
    skipped later; a typo is an error)."""
    for name in cfg["datasets"]:
        if name not in DATASETS:
            close = difflib.get_close_matches(name, list(DATASETS), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(f"config key datasets.{name}: {name!r} is not a registered dataset{hint}; the "
                             f"datasets are {', '.join(DATASETS)}: rename it to one of those or remove it")
    raw = cfg.get("conversion_study") or []     # optional: no study
    refs = [(f"conversion_study[{i}]", e.get("datasets"))
            for i, e in enumerate([raw] if isinstance(raw, dict) else raw)]
    refs.append(("tracks", (cfg.get("tracks") or {}).get("datasets")))     # optional: no tracks
    for where, names in refs:
        unknown = [name for name in names or [] if name not in cfg["datasets"]]
        if unknown:
            raise ValueError(f"config {where}.datasets names {unknown}, which are not in datasets "
                             f"({sorted(cfg['datasets'])}): add them to datasets or correct the names")

