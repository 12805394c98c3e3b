"""A small JSON Schema checker for external tools' arguments.

The ``jsonschema`` package costs about 1.5 s to import here (its format checkers build
a grammar at import), which every session start would pay. External tools need only
the common keywords, so this module checks those and ignores the rest (a tool must
still validate its own input):

type, enum, const, properties, required, additionalProperties, items, minItems,
maxItems, uniqueItems, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
minLength, maxLength, pattern, anyOf, oneOf, allOf.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


class SchemaProblem(ValueError):
    """The schema itself is malformed."""


def check_schema(schema: Any, where: str = "schema") -> None:
    """Refuse a schema whose known keywords have the wrong shape."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise SchemaProblem(f"{where} must be an object")
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    for k in kinds:
        if k not in TYPES:
            raise SchemaProblem(f"{where}.type {k!r} is not one of {', '.join(TYPES)}")
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            raise SchemaProblem(f"{where}.properties must be an object")
        for name, sub in props.items():
            check_schema(sub, f"{where}.properties.{name}")
    required = schema.get("required")
    if required is not None and not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
        raise SchemaProblem(f"{where}.required must be an array of strings")
    for key in ("items", "additionalProperties"):
        if key in schema:
            check_schema(schema[key], f"{where}.{key}")
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            if not isinstance(schema[key], list) or not schema[key]:
                raise SchemaProblem(f"{where}.{key} must be a non-empty array")
            for i, sub in enumerate(schema[key]):
                check_schema(sub, f"{where}.{key}[{i}]")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise SchemaProblem(f"{where}.enum must be an array")
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except (re.error, TypeError):
            raise SchemaProblem(f"{where}.pattern is not a valid regular expression") from None


def _is_type(value: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float))
    return True


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def iter_errors(value: Any, schema: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(where, message) for every problem found, where is a dotted path or ''."""
    if schema is True or not isinstance(schema, dict):
        return
    if schema is False:
        yield path, "no value is allowed here"
        return
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_is_type(value, k) for k in kinds):
            yield path, f"{_show(value)} is not of type {' or '.join(repr(k) for k in kinds)}"
            return
    if "enum" in schema and value not in schema["enum"]:
        yield path, f"{_show(value)} is not one of {_show(schema['enum'])}"
    if "const" in schema and value != schema["const"]:
        yield path, f"{_show(schema['const'])} was expected"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            yield path, f"{value} is less than the minimum of {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            yield path, f"{value} is greater than the maximum of {schema['maximum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            yield path, f"{value} must be greater than {schema['exclusiveMinimum']}"
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            yield path, f"{value} must be less than {schema['exclusiveMaximum']}"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            yield path, f"{_show(value)} is shorter than {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            yield path, f"{_show(value)} is longer than {schema['maxLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            yield path, f"{_show(value)} does not match {schema['pattern']!r}"
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            yield path, f"{_show(value)} should have at least {schema['minItems']} item(s)"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            yield path, f"{_show(value)} should have at most {schema['maxItems']} item(s)"
        if schema.get("uniqueItems"):
            seen = [json.dumps(v, sort_keys=True) for v in value]
            if len(set(seen)) != len(seen):
                yield path, f"{_show(value)} has repeated items"
        items = schema.get("items")
        if isinstance(items, (dict, bool)):
            for i, item in enumerate(value):
                yield from iter_errors(item, items, f"{path}.{i}" if path else str(i))
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                yield path, f"'{name}' is a required property"
        props = schema.get("properties", {})
        for name, sub in props.items():
            if name in value:
                yield from iter_errors(value[name], sub, f"{path}.{name}" if path else name)
        extra_schema = schema.get("additionalProperties", True)
        extra = [k for k in value if k not in props]
        if extra_schema is False and extra:
            yield path, f"Additional properties are not allowed ({', '.join(repr(k) for k in extra)} unexpected)"
        elif isinstance(extra_schema, dict):
            for name in extra:
                yield from iter_errors(value[name], extra_schema, f"{path}.{name}" if path else name)
    for sub in schema.get("allOf", []):
        yield from iter_errors(value, sub, path)
    if "anyOf" in schema and not any(not list(iter_errors(value, s, path)) for s in schema["anyOf"]):
        yield path, f"{_show(value)} does not match any of the allowed forms"
    if "oneOf" in schema:
        matches = sum(1 for s in schema["oneOf"] if not list(iter_errors(value, s, path)))
        if matches != 1:
            yield path, f"{_show(value)} must match exactly one of the allowed forms ({matches} matched)"
