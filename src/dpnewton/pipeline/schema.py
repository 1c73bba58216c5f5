"""The config schema (``workflow/schemas/config.schema.yaml``): loading it, filling its ``default``
values into a config, and giving ``--config`` strings their schema type.

The filling is the one ``snakemake.utils.validate(set_default=True)`` did before (same keys, same
values), so the config hash of ``protocol.json`` (over the filled config) and every job spec hash are
unchanged by it. :func:`dpnewton.pipeline.config.load_config` is the entry that uses all of this.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, validators

#: the workflow's config schema (the checkout's ``workflow/schemas``; ``load_config`` takes another)
SCHEMA_PATH = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"


def load_schema(path: str | Path | None = None) -> dict:
    with open(path or SCHEMA_PATH) as fh:
        return yaml.safe_load(fh)


def validator(schema: dict, fill: bool):
    """A Draft 2020-12 validator; with ``fill`` its ``properties`` check also sets absent properties to
    (a copy of) their schema ``default`` first, as ``snakemake.utils.validate(set_default=True)`` does
    (the jsonschema FAQ recipe), only on objects."""
    if not fill:
        return Draft202012Validator(schema)
    check_properties = Draft202012Validator.VALIDATORS["properties"]

    def properties_with_defaults(validator, properties, instance, node):
        if validator.is_type(instance, "object"):
            for name, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from check_properties(validator, properties, instance, node)

    return validators.extend(Draft202012Validator, {"properties": properties_with_defaults})(schema)


def fill_defaults(cfg: dict, schema: dict | None = None) -> dict:
    """Set every absent key that has a schema default, in place (no validation errors raised). A null
    ``datasets``/``algorithms`` entry becomes ``{}`` first and is filled too (snakemake's filling failed
    on such entries, so no config with one had a hash to keep)."""
    for group in ("datasets", "algorithms"):
        if isinstance(cfg.get(group), dict):
            cfg[group] = {k: ({} if v is None else v) for k, v in cfg[group].items()}
    for _ in validator(schema if schema is not None else load_schema(), fill=True).iter_errors(cfg):
        pass
    return cfg



#: the spellings of a boolean that ``snakemake --config key=value`` passes on as a string (Snakemake
#: itself turns only ``True`` and ``False`` into booleans, and nested values stay strings)
BOOLEAN_WORDS = {"true": True, "yes": True, "on": True, "1": True,
                 "false": False, "no": False, "off": False, "0": False}


def coerce_cli_values(cfg: dict, schema: dict) -> dict:
    """Turn the strings that ``--config`` leaves where the JSON schema wants a boolean (or only a
    number) into that type, in place; returns ``cfg``.

    ``snakemake --config publish_figures=false`` passes the string ``"false"``, and
    ``--config 'claims={enabled: true}'`` a mapping of strings. A string at a key whose schema type
    is boolean (and not string) becomes ``True``/``False`` when it is one of :data:`BOOLEAN_WORDS`
    (any case), else it raises ``ValueError`` naming the key and the spellings to use (``--config
    key=0``/``=1``, which Snakemake passes as integers, become booleans there too); a string at a
    key typed number/integer (and not string) becomes that number when it parses as one (the schema
    then reports anything left). Other values are not touched.
    """
    defs = schema.get("$defs", {})

    def resolve(node):
        while isinstance(node, dict) and "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node if isinstance(node, dict) else {}

    def branches(node):
        node = resolve(node)
        alts = node.get("oneOf") or node.get("anyOf")
        return [node] + [b for alt in (alts or []) for b in branches(alt)]

    def fix(value, node, where):
        nodes = branches(node)
        if isinstance(value, str):
            types = set()
            for n in nodes:
                t = n.get("type", [])
                types |= set([t] if isinstance(t, str) else t)
            if "string" in types or not types:
                return value
            if "boolean" in types:
                word = value.strip().lower()
                if word in BOOLEAN_WORDS:
                    return BOOLEAN_WORDS[word]
                if not types & {"integer", "number", "null"}:
                    raise ValueError(f"config key {where}: {value!r} is not a boolean; write true or false "
                                     f"(True/False, yes/no, on/off and 1/0 work too), e.g. --config {where}=false"
                                     if "." not in where else
                                     f"config key {where}: {value!r} is not a boolean; write true or false "
                                     f"(True/False, yes/no, on/off and 1/0 work too)")
            for kind, parse in (("integer", int), ("number", float)):
                if kind in types:
                    try:
                        return parse(value)
                    except ValueError:
                        pass
            if "null" in types and value.strip().lower() in ("null", "none", "~"):
                return None
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
            types = {t for n in nodes for t in ([n["type"]] if isinstance(n.get("type"), str) else n.get("type", []))}
            return bool(value) if types == {"boolean"} else value
        if isinstance(value, dict):
            for key in list(value):
                sub = [n["properties"][key] for n in nodes if key in n.get("properties", {})]
                sub += [n["additionalProperties"] for n in nodes
                        if key not in n.get("properties", {}) and isinstance(n.get("additionalProperties"), dict)]
                if sub:
                    value[key] = fix(value[key], {"anyOf": sub}, f"{where}.{key}" if where else str(key))
            return value
        if isinstance(value, list):
            items = [n["items"] for n in nodes if isinstance(n.get("items"), dict)]
            if items:
                return [fix(v, {"anyOf": items}, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    fix(cfg, schema, "")
    return cfg

