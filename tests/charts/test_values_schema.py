"""values.schema.json: closed everywhere, rejecting misspelt values through Helm itself; values.yaml commented."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

from charts.conftest import NAMESPACE, install

# Kubernetes objects passed through verbatim (their own API validates them): open on purpose.
PASS_THROUGH = {"affinity", "global", "podSecurityContext", "containerSecurityContext"}


def schema(chart_dir: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((chart_dir / "values.schema.json").read_text())
    return loaded


def object_schemas(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield path, node
        for key, child in node.items():
            yield from object_schemas(child, f"{path}/{key}")
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from object_schemas(child, f"{path}[{i}]")


def test_schema_is_valid_and_accepts_the_defaults(chart_dir: Path) -> None:
    Draft7Validator.check_schema(schema(chart_dir))
    values = yaml.safe_load((chart_dir / "values.yaml").read_text())
    assert list(Draft7Validator(schema(chart_dir)).iter_errors(values)) == []


def is_closed(path: str, node: dict[str, Any]) -> bool:
    """Objects with named properties forbid others; maps constrain their values; pass-throughs are named."""
    if "properties" in node:
        return node.get("additionalProperties") is False
    name = path.rsplit("/", 1)[-1]
    return name in PASS_THROUGH or "additionalProperties" in node or path.endswith("/items")


def test_every_object_schema_is_closed(chart_dir: Path) -> None:
    """``additionalProperties: false`` on every object with named properties."""
    assert [path for path, node in object_schemas(schema(chart_dir)) if not is_closed(path, node)] == []


def test_schema_covers_every_default_value(chart_dir: Path) -> None:
    """Every key of values.yaml is declared (a value the schema does not know would be rejected anyway)."""
    def walk(values: dict[str, Any], node: dict[str, Any], path: str) -> Iterator[str]:
        for key, value in values.items():
            declared = node.get("properties", {}).get(key)
            if declared is None:
                if not isinstance(node.get("additionalProperties"), dict):
                    yield f"{path}.{key}"
            elif isinstance(value, dict) and "properties" in declared:
                yield from walk(value, declared, f"{path}.{key}")

    values = yaml.safe_load((chart_dir / "values.yaml").read_text())
    assert list(walk(values, schema(chart_dir), "")) == []


@pytest.mark.parametrize("values, misspelt", [
    ({"gateway": {"replica": 2}}, "replica"),
    ({"crd": {"enabled": False}}, "crd"),
    ({"operator": {"livenessProbe": {"periodSecond": 5}}}, "periodSecond"),
    ({"trials": {"networkPolicy": {"enabled": False}}}, "networkPolicy"),
    ({"gateway": {"upstreams": [{"name": "x", "baseUrl": "https://x", "apiKeySecrets": {"name": "k", "key": "k"}}]}},
     "apiKeySecrets"),
], ids=["gateway.replica", "crd", "livenessProbe.periodSecond", "trials.networkPolicy", "upstream.apiKeySecrets"])
def test_helm_rejects_a_misspelt_value(helm: Any, values: dict[str, Any], misspelt: str) -> None:
    with pytest.raises(helm.InstallError, match=re.escape(misspelt)):
        install(helm, values)


@pytest.mark.parametrize("values, field", [
    ({"store": {"uri": "http://bucket"}}, "uri"),
    ({"operator": {"logFormat": "xml"}}, "logFormat"),
    ({"image": {"digest": "latest"}}, "digest"),
    ({"gateway": {"replicas": 2}}, "replicas"),
], ids=["store.uri", "operator.logFormat", "image.digest", "gateway.replicas"])
def test_helm_rejects_a_wrong_value(helm: Any, values: dict[str, Any], field: str) -> None:
    with pytest.raises(helm.InstallError, match=field):
        install(helm, values)


def test_lint_fails_on_a_misspelt_default(helm: Any, chart_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "anchorage"
    shutil.copytree(chart_dir, broken)
    values = (broken / "values.yaml").read_text()
    (broken / "values.yaml").write_text(values.replace("\n  livenessPort: 8080", "\n  livenessPrt: 8080"))
    config = helm.Configuration(namespace=NAMESPACE, kubeconfig="/dev/null")
    result = asyncio.run(helm.Lint(config).run(str(broken)))
    # helm-sdkpy drops the error texts (Err is {}): the error severity (3) on values.yaml says it.
    assert {"Severity": 3, "Path": "values.yaml", "Err": {}} in result["Messages"], result
    assert result["Errors"]


def test_every_value_is_commented(chart_dir: Path) -> None:
    """Each key line of values.yaml has a comment line right above it (the chart's documentation)."""
    lines = (chart_dir / "values.yaml").read_text().splitlines()
    uncommented = []
    for i, line in enumerate(lines):
        if re.match(r"^\s*[A-Za-z][\w-]*:", line):
            previous = next((p for p in reversed(lines[:i]) if p.strip()), "")
            if not previous.strip().startswith("#"):
                uncommented.append(f"{i + 1}: {line.strip()}")
    assert uncommented == []
