"""Structural-schema checks of custom resources as the API server does them: unknown fields, schema errors.

Used by ``anchorage_devcluster.apiserver`` on every create and update of a custom resource: fields the CRD's
structural schema does not declare are dropped (the default, ``fieldValidation`` Ignore or Warn) or,
with ``?fieldValidation=Strict`` (what kubectl sends), reject the request with 400 BadRequest and
``strict decoding error: unknown field "spec.x"``. ``metadata`` and nodes marked
``x-kubernetes-preserve-unknown-fields`` keep everything. :func:`schema_causes` words the schema's
violations as the API server does (``spec.seed: Invalid value: -1: spec.seed in body should be greater
than or equal to 0``, ``Unsupported value``, ``Required value``), so tests can assert the same
fragments against the fake and a real cluster.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema


def _keeps_everything(schema: dict[str, Any]) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields")) or (
        schema.get("type") == "object" and "properties" not in schema and "additionalProperties" not in schema)


def prune(schema: dict[str, Any], value: Any, path: str = "") -> tuple[Any, list[str]]:
    """``value`` without the fields ``schema`` does not declare, and the paths of those fields."""
    if _keeps_everything(schema):
        return value, []
    unknown: list[str] = []
    if isinstance(value, dict):
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        kept: dict[str, Any] = {}
        for key, sub in value.items():
            where = f"{path}.{key}" if path else key
            if path == "" and key in ("apiVersion", "kind", "metadata"):
                kept[key] = sub
            elif props is not None and key in props:
                kept[key], found = prune(props[key], sub, where)
                unknown += found
            elif isinstance(extra, dict):
                kept[key], found = prune(extra, sub, where)
                unknown += found
            elif extra is True:
                kept[key] = sub
            else:
                unknown.append(where)
        return kept, unknown
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = []
        for index, item in enumerate(value):
            pruned, found = prune(schema["items"], item, f"{path}[{index}]")
            items.append(pruned)
            unknown += found
        return items, unknown
    return value, unknown


def _path(parts: list[str | int]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _value(instance: Any) -> str:
    if isinstance(instance, dict | list):
        return '"object"' if isinstance(instance, dict) else '"array"'
    return json.dumps(instance)[:80]


def _cause(error: jsonschema.ValidationError, prefix: list[str | int]) -> dict[str, str]:
    """One schema error as the API server words it (kube-openapi's validation messages)."""
    parts = [*prefix, *error.absolute_path]
    where, value, arg, kind = _path(parts), _value(error.instance), error.validator_value, str(error.validator)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if kind == "required":
        missing = str(error.message).split("'")[1] if "'" in error.message else ""
        return {"reason": "FieldValueRequired", "field": _path([*parts, missing]) if missing else where,
                "message": "Required value"}
    if kind == "enum":
        allowed = ", ".join(json.dumps(v) for v in arg)
        return {"reason": "FieldValueNotSupported", "field": where,
                "message": f"Unsupported value: {value}: supported values: {allowed}"}
    texts = {
        "minimum": f"should be greater than {'' if schema.get('exclusiveMinimum') is True else 'or equal to '}{arg}",
        "maximum": f"should be less than {'' if schema.get('exclusiveMaximum') is True else 'or equal to '}{arg}",
        "type": f"must be of type {arg}: {value}",
        "pattern": f"should match '{arg}'",
        "minLength": f"should be at least {arg} chars long",
        "maxLength": f"should be at most {arg} chars long",
        "minItems": f"should have at least {arg} items",
        "maxItems": f"should have at most {arg} items",
    }
    detail = f"{where or '<root>'} in body {texts[kind]}" if kind in texts else str(error.message)
    return {"reason": "FieldValueInvalid", "field": where or "<root>", "message": f"Invalid value: {value}: {detail}"}


def schema_causes(schema: dict[str, Any], value: Any, prefix: list[str | int] | None = None) -> list[dict[str, str]]:
    """Causes (reason, field, message) for every way ``value`` breaks ``schema``, in the API server's words."""
    validator = jsonschema.Draft4Validator(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    return [_cause(error, prefix or []) for error in errors]


# ----------------------------------------------------------------- the rules a CRD's schema must follow


def _node_causes(node: dict[str, Any], path: str, *, in_free_form: bool) -> list[str]:
    errors: list[str] = []
    free = in_free_form or bool(node.get("x-kubernetes-preserve-unknown-fields"))
    if not node.get("type") and not free and not node.get("x-kubernetes-int-or-string"):
        errors.append(f"{path}.type: Required value: must not be empty for specified object fields")
    if "properties" in node and node.get("additionalProperties") not in (None, False):
        errors.append(f"{path}.additionalProperties: Forbidden: additionalProperties and properties are mutual "
                      "exclusive")
    if "$ref" in node:
        errors.append(f"{path}.$ref: Forbidden: $ref is not supported")
    for name, sub in (node.get("properties") or {}).items():
        errors += _node_causes(sub, f"{path}.properties[{name}]", in_free_form=free)
    if isinstance(node.get("items"), dict):
        errors += _node_causes(node["items"], f"{path}.items", in_free_form=free)
    if isinstance(node.get("additionalProperties"), dict):
        errors += _node_causes(node["additionalProperties"], f"{path}.additionalProperties", in_free_form=free)
    return errors


def crd_schema_causes(schema: dict[str, Any], path: str = "spec.validation.openAPIV3Schema") -> list[str]:
    """Why a CRD's ``openAPIV3Schema`` is not structural, in the API server's words (empty when it is).

    Checked as the API server does when a CRD is created or updated: every specified field has a
    ``type`` (except under ``x-kubernetes-preserve-unknown-fields`` / ``x-kubernetes-int-or-string``),
    ``properties`` and ``additionalProperties`` exclude each other, no ``$ref``, and the root ``metadata``
    may specify nothing but ``type: object`` and restrictions of ``name`` / ``generateName`` — not even a
    ``description``.
    """
    errors = [f"{path}.type: Required value: must be object at the root"] if schema.get("type") != "object" else []
    metadata = (schema.get("properties") or {}).get("metadata")
    if isinstance(metadata, dict):
        rest = {k: v for k, v in metadata.items() if k not in ("type", "properties")}
        names = set(metadata.get("properties") or {}) - {"name", "generateName"}
        if rest or names or metadata.get("type", "object") != "object":
            errors.append(f"{path}.properties[metadata]: Forbidden: must not specify anything other than name and "
                          "generateName, but metadata is implicitly specified")
    return errors + _node_causes(schema, path, in_free_form=False)
