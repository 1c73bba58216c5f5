"""The config schema (``workflow/schemas/config.schema.yaml``): loading it, filling its ``default``
values into a config, and giving ``--config`` strings their schema type.

The filling is the one ``snakemake.utils.validate(set_default=True)`` did before (same keys, same
values), so the config hash of ``protocol.json`` (over the filled config) and every job spec hash are
unchanged by it. :func:`dpnewton.pipeline.config.load_config` is the entry that uses all of this.

Errors are one line each, naming the key, the value, the rule and the fix (:func:`validate_config`,
:func:`check_finite`): ``config key seeds: 0 is less than the minimum of 1; set seeds to an integer
>= 1, or a non-empty list of distinct integers >= 0``. An unknown key names the keys allowed beside
it, the closest first; oneOf/anyOf errors say what the key accepts instead of "not valid under any
of the given schemas"; the schema itself is never printed.
"""

from __future__ import annotations

import copy
import difflib
import math
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import best_match

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
#: the spellings of "no value" (YAML's null) that ``--config key=null`` passes on as a string
NULL_WORDS = ("null", "none", "~", "")


def coerce_cli_values(cfg: dict, schema: dict) -> dict:
    """Turn the strings that ``--config`` leaves where the JSON schema wants a boolean (or only a
    number) into that type, in place; returns ``cfg``.

    ``snakemake --config publish_figures=false`` passes the string ``"false"``, and
    ``--config 'claims={enabled: true}'`` a mapping of strings. A string at a key whose schema type
    is boolean (and not string) becomes ``True``/``False`` when it is one of :data:`BOOLEAN_WORDS`
    (any case), else it raises ``ValueError`` naming the key and the spellings to use (``--config
    key=0``/``=1``, which Snakemake passes as integers, become booleans there too); one of
    :data:`NULL_WORDS` at a key that may be null becomes None (``--config data_dir=null``: no folder,
    also where a string is allowed); a string at a
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
            if "null" in types and value.strip().lower() in NULL_WORDS:
                return None
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



# ---------------------------------------------------------------------------------------------
# One-line messages: the key, the value, the rule and the fix
# ---------------------------------------------------------------------------------------------
def config_error(message: str, path=()) -> ValidationError:
    """A ``jsonschema.ValidationError`` whose text is ``message`` alone (one line; no schema dump)."""
    return ValidationError(message, path=list(path))


def key_name(path) -> str:
    """``('algorithms', 'dp-gd', 'grid')`` -> ``algorithms.dp-gd.grid``; list indices as ``[i]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _resolve(node, defs: dict) -> dict:
    """The node a ``$ref`` points to (followed until none is left); {} for a non-mapping."""
    while isinstance(node, dict) and "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    return node if isinstance(node, dict) else {}


def _alternatives(node: dict, defs: dict) -> list[dict]:
    """The node itself, or its oneOf/anyOf branches (resolved)."""
    alts = node.get("oneOf") or node.get("anyOf")
    return [_resolve(a, defs) for a in alts] if alts else [node]


def node_at(schema: dict, path) -> dict:
    """The schema node of the config key at ``path`` ({} where the schema says nothing)."""
    defs = schema.get("$defs", {})
    node = _resolve(schema, defs)
    for part in path:
        found = {}
        for alt in _alternatives(node, defs):
            if isinstance(part, int) and isinstance(alt.get("items"), dict):
                found = alt["items"]
            elif not isinstance(part, int) and part in alt.get("properties", {}):
                found = alt["properties"][part]
            elif not isinstance(part, int) and isinstance(alt.get("additionalProperties"), dict):
                found = alt["additionalProperties"]
            if found:
                break
        node = _resolve(found, defs)
    return node


def _bounds(node: dict) -> str:
    """A number node's bounds in words: ``>= 0 and < 1``; '' without bounds."""
    signs = [(">=", "minimum"), (">", "exclusiveMinimum"), ("<=", "maximum"), ("<", "exclusiveMaximum")]
    return " and ".join(f"{sign} {node[key]}" for sign, key in signs if key in node)


_NOUNS = {"number": ("a number", "numbers"), "integer": ("an integer", "integers"), "string": ("a string", "strings"),
          "boolean": ("true or false", "booleans"), "null": ("null", "nulls"), "object": ("a mapping", "mappings")}


def describe(node: dict, schema: dict, plural: bool = False) -> str:
    """What a schema node accepts, in words: ``a number > 0``, ``an integer >= 1, or a non-empty list
    of distinct integers >= 0``, ``one of error, skip``, ``a mapping with the keys a, b``."""
    defs = schema.get("$defs", {})
    node = _resolve(node, defs)
    if node.get("oneOf") or node.get("anyOf"):
        return ", or ".join(describe(a, schema, plural) for a in _alternatives(node, defs))
    if "enum" in node:
        return ("any of " if plural else "one of ") + ", ".join(str(v) for v in node["enum"])
    types = node.get("type", [])
    words = [_describe_type(t, node, schema, plural) for t in ([types] if isinstance(types, str) else types)]
    return ", or ".join(words) or ("values" if plural else "a value")


def _describe_type(kind: str, node: dict, schema: dict, plural: bool) -> str:
    """One JSON type of a node in words (:func:`describe`): lists with their items, numbers with their
    bounds, closed mappings with their keys."""
    if kind == "array":
        size = "non-empty " if node.get("minItems", 0) >= 1 else ""
        distinct = "distinct " if node.get("uniqueItems") else ""
        items = describe(node["items"], schema, plural=True) if isinstance(node.get("items"), dict) else "values"
        return f"{'' if plural else 'a '}{size}list{'s' if plural else ''} of {distinct}{items}"
    noun = _NOUNS.get(kind, ("a value", "values"))[1 if plural else 0]
    if kind in ("number", "integer") and _bounds(node):
        return f"{noun} {_bounds(node)}"
    if kind == "object" and node.get("additionalProperties") is False and node.get("properties"):
        return f"{noun} with the keys {', '.join(sorted(node['properties']))}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"{noun} of names to {describe(node['additionalProperties'], schema, plural=True)}"
    return noun


def allowed_keys(schema: dict, path) -> list[str]:
    """The keys the schema allows in the mapping at ``path`` (sorted)."""
    node = node_at(schema, path)
    defs = schema.get("$defs", {})
    return sorted({k for alt in _alternatives(node, defs) for k in alt.get("properties", {})})


def _where(path) -> str:
    """The key at ``path`` as the messages name it; the top level by name."""
    return key_name(path) or "the top level"


def unknown_key_message(schema: dict, path, key: str) -> str:
    """The unknown key, the keys allowed beside it (the closest first, if any is close) and the fix."""
    allowed = allowed_keys(schema, path)
    close = difflib.get_close_matches(key, allowed, n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return (f"config key {key_name([*path, key])}: unknown key ({key!r} was unexpected{hint}); "
            f"{_where(path)} takes {', '.join(allowed)}: rename or remove it")


def schema_error_message(err: ValidationError, schema: dict) -> str:
    """One line for the most relevant error of a config (``jsonschema.exceptions.best_match``)."""
    path = list(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        node = node_at(schema, path)
        known = {k for alt in _alternatives(node, schema.get("$defs", {})) for k in alt.get("properties", {})}
        extra = sorted(k for k in err.instance if k not in known)
        if extra:
            return unknown_key_message(schema, path, extra[0])
    if "propertyNames" in err.schema_path:
        allowed = [str(v) for v in err.schema.get("enum", [])]
        close = difflib.get_close_matches(str(err.instance), allowed, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return (f"config key {key_name([*path, err.instance])}: {err.message}{hint}; rename it to one of "
                f"those or remove it")
    problem = err.message
    if err.validator in ("oneOf", "anyOf"):
        problem = f"{err.instance!r} is not accepted"
    return f"config key {_where(path)}: {problem}; set {_where(path)} to {describe(node_at(schema, path), schema)}"


def validate_config(cfg: dict, schema: dict) -> None:
    """Validate against the schema; the first error (the most relevant one) is raised as a one-line
    ``jsonschema.ValidationError`` (:func:`schema_error_message`)."""
    err = best_match(validator(schema, fill=False).iter_errors(cfg))
    if err is not None:
        raise config_error(schema_error_message(err, schema), err.absolute_path) from None


def check_finite(cfg, schema: dict, path=()) -> None:
    """No number in the config is NaN or infinite. JSON schema's bounds let NaN through (every
    comparison with NaN is false), and no key takes either, so both are rejected here, naming the key
    and what it takes."""
    if isinstance(cfg, dict):
        for key, value in cfg.items():
            check_finite(value, schema, (*path, key))
    elif isinstance(cfg, list):
        for i, value in enumerate(cfg):
            check_finite(value, schema, (*path, i))
    elif isinstance(cfg, float) and not math.isfinite(cfg):
        what = "not a number (NaN)" if math.isnan(cfg) else "not a finite number"
        node = node_at(schema, path)
        takes = describe(node, schema) if node else "a finite number"
        raise config_error(f"config key {_where(path)}: {cfg!r} is {what}; set {_where(path)} to {takes}", path)
