"""The chart's value documentation in one place: the ``# --`` comments of charts/anchorage/values.yaml.

``python tools/chart_values.py`` copies each value's comment into the ``description`` of its property in
values.schema.json (properties only the schema knows, such as the fields of a list's items, keep the
description written there) and writes the values table of charts/anchorage/README.md (between its
``<!-- values:begin -->`` and ``<!-- values:end -->`` markers). ``--check`` changes nothing and exits 1 when
either file differs from what it would write (tests/charts/test_values_docs.py runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "anchorage"
BEGIN, END = "<!-- values:begin -->", "<!-- values:end -->"
KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][\w-]*):")


def comments(values_text: str) -> dict[str, str]:
    """``{dotted.path: description}`` from the ``# --`` comment block right above each key of values.yaml."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    block: list[str] = []
    for line in values_text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        match = KEY.match(line) if stripped else None
        if match:
            indent = len(match["indent"])
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, match["key"]))
            start = max((i for i, text in enumerate(block) if text.startswith("--")), default=None)
            if start is not None:
                text = " ".join([block[start].removeprefix("--").strip(), *block[start + 1:]]).strip()
                found[".".join(key for _, key in stack)] = text
        block = []
    return found


def _described(node: dict[str, Any], description: str) -> dict[str, Any]:
    """``node`` with ``description`` right after its ``type`` (or first)."""
    rest = {k: v for k, v in node.items() if k != "description"}
    head = {k: rest.pop(k) for k in ("type", "$schema", "title") if k in rest}
    return {**head, "description": description, **rest}


def schema_with_descriptions(schema: dict[str, Any], described: dict[str, str], path: str = "") -> dict[str, Any]:
    """A copy of ``schema`` whose properties carry their values.yaml description (else the one they have)."""
    out = dict(schema)
    if "properties" in out:
        props = {}
        for key, child in out["properties"].items():
            child_path = f"{path}.{key}" if path else key
            child = schema_with_descriptions(child, described, child_path)
            text = described.get(child_path) or child.get("description")
            props[key] = _described(child, text) if text else child
        out["properties"] = props
    if isinstance(out.get("items"), dict):
        out["items"] = schema_with_descriptions(out["items"], described, f"{path}[]")
    return out


def undescribed(schema: dict[str, Any], path: str = "") -> list[str]:
    """Properties of ``schema`` (at any depth, list items included) without a description."""
    missing: list[str] = []
    for key, child in (schema.get("properties") or {}).items():
        child_path = f"{path}.{key}" if path else key
        if not child.get("description"):
            missing.append(child_path)
        missing += undescribed(child, child_path)
    if isinstance(schema.get("items"), dict):
        missing += undescribed(schema["items"], f"{path}[]")
    return missing


def _schema_at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for key in path.split("."):
        node = (node.get("properties") or {}).get(key) or {}
    return node


def _value_at(values: Any, path: str) -> Any:
    for key in path.split("."):
        values = values.get(key) if isinstance(values, dict) else None
    return values


def _type(node: dict[str, Any], value: Any) -> str:
    if "enum" in node:
        return " \\| ".join(json.dumps(v) for v in node["enum"])
    kind = node.get("type")
    if isinstance(kind, list):
        return " \\| ".join(kind)
    if kind:
        return str(kind)
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), "any")


def table(values_text: str, schema: dict[str, Any]) -> str:
    """The README's values table: one row per value of values.yaml whose children are not listed themselves."""
    described = comments(values_text)
    values = yaml.safe_load(values_text)
    rows = ["| value | type | default | description |", "|---|---|---|---|"]
    for path, text in described.items():
        if any(other.startswith(path + ".") for other in described):
            continue  # a section: its values have rows of their own
        value = _value_at(values, path)
        default = json.dumps(value, ensure_ascii=False).replace("|", "\\|")
        rows.append(f"| `{path}` | {_type(_schema_at(schema, path), value)} | `{default}` | "
                    f"{text.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)


def readme_with_table(readme: str, rendered: str) -> str:
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"charts/anchorage/README.md lacks the {BEGIN} ... {END} markers")
    return readme[:start + len(BEGIN)] + "\n" + rendered + "\n" + readme[end:]


def generate(chart: Path = CHART) -> dict[Path, str]:
    """What values.schema.json and README.md should contain."""
    values_text = (chart / "values.yaml").read_text()
    schema = json.loads((chart / "values.schema.json").read_text())
    updated = schema_with_descriptions(schema, comments(values_text))
    readme = readme_with_table((chart / "README.md").read_text(), table(values_text, updated))
    return {chart / "values.schema.json": json.dumps(updated, indent=2, ensure_ascii=False) + "\n",
            chart / "README.md": readme}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file is out of date")
    args = parser.parse_args(argv)
    stale = [path for path, text in generate().items() if path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(CHART.parents[1])} is out of date: run python tools/chart_values.py",
                  file=sys.stderr)
        return 1 if stale else 0
    for path, text in generate().items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
