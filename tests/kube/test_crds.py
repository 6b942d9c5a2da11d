"""The CRDs in crds/ are generated from the pydantic models, structural, documented and valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from anchorage.commands.dev import render_crds
from anchorage.runtime.kube.crds import SchemaError, all_crds, crd, structural

K8S_VERSION = "1.30.0"


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        found += _walk(sub, f"{path}.{name}")
    if "items" in node:
        found += _walk(node["items"], f"{path}[]")
    return found


def test_checked_in_crds_match_the_models(repo_root: Path) -> None:
    rendered = render_crds()
    on_disk = {p.name: p.read_text() for p in (repo_root / "crds").glob("*.yaml")}
    assert on_disk == rendered, "crds/ drifted from anchorage/manifests.py: run `anchorage dev crds`"


def test_checked_in_peering_crd_is_the_generated_one(repo_root: Path) -> None:
    from anchorage.commands.dev import render_peering_crd
    from anchorage.runtime.kube.crds import peering_crd

    for name, text in render_peering_crd().items():
        assert (repo_root / "crds" / name).read_text() == text, "crds/peering/ drifted: run `anchorage dev crds`"
    kubernetes_validate.validate(peering_crd(), K8S_VERSION, strict=True)


@pytest.mark.parametrize("name", sorted(all_crds()), ids=lambda n: n.split("_")[1])
def test_crd_is_a_valid_kubernetes_object(name: str) -> None:
    kubernetes_validate.validate(all_crds()[name], K8S_VERSION, strict=True)


@pytest.mark.parametrize("kind", ["Trial", "VerificationCampaign", "ScoringRun"])
def test_schema_is_structural_and_documented(kind: str) -> None:
    schema = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    # the API server allows nothing on the root metadata but its type (and name/generateName rules)
    assert schema["properties"]["metadata"] == {"type": "object"}
    for path, node in _walk(schema):
        if path == ".metadata":
            continue
        assert "type" in node or node.get("x-kubernetes-preserve-unknown-fields"), f"{kind}{path} has no type"
        assert not ({"properties", "additionalProperties"} <= node.keys()), f"{kind}{path} is not structural"
        assert not {"anyOf", "oneOf", "$ref", "title", "default"} & node.keys(), f"{kind}{path}: {node.keys()}"
        if path and not path.endswith("[]"):
            assert node.get("description"), f"{kind}{path} has no description"


def test_status_subresource_conditions_and_columns() -> None:
    trial = crd("Trial")["spec"]
    version = trial["versions"][0]
    assert version["subresources"] == {"status": {}}
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"type", "status", "lastTransitionTime", "reason", "message"} <= set(
        status["conditions"]["items"]["required"])
    assert status["observedGeneration"]["type"] == "integer"
    assert [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")] == [
        "Phase", "Task", "Entry", "Seed", "O-Eval", "Cost", "Age"]
    assert trial["names"]["shortNames"] == ["tr"] and trial["names"]["categories"] == ["anchorage"]
    campaign = crd("VerificationCampaign")["spec"]["versions"][0]
    assert {"Progress", "Best", "Cost"} <= {c["name"] for c in campaign["additionalPrinterColumns"]}
    assert crd("ScoringRun")["spec"]["names"]["shortNames"] == ["sr"]


@pytest.mark.parametrize(("kind", "path", "fragment"), [
    ("Trial", ("spec", "agent"), "agent.command"),
    ("VerificationCampaign", ("spec",), "baseline must be the name"),
    ("ScoringRun", ("spec",), "exactly one of"),
], ids=["command-needs-command", "baseline-is-entry", "one-source"])
def test_cross_field_rules_are_cel(kind: str, path: tuple[str, ...], fragment: str) -> None:
    node = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for part in path:
        node = node["properties"][part]
    rules = node["x-kubernetes-validations"]
    if kind == "VerificationCampaign":  # CEL cost estimation needs bounded lists
        assert node["properties"]["entries"]["maxItems"] == 100
    assert any(fragment in r["message"] for r in rules)
    assert all(r["rule"].count("(") == r["rule"].count(")") for r in rules)


def test_ceilings_lower_the_limits() -> None:
    spec = crd("VerificationCampaign", {"cpus": 8})["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    limits = spec["properties"]["spec"]["properties"]["limits"]["properties"]
    assert limits["cpus"]["maximum"] == 8
    with pytest.raises(SchemaError, match="unknown limit"):
        crd("Trial", {"cores": 8})


def test_a_field_without_description_is_an_error() -> None:
    with pytest.raises(SchemaError, match="'x' has no description"):
        structural({"type": "object", "properties": {"x": {"type": "string"}}}, {})


def test_crds_load_as_yaml_documents(repo_root: Path) -> None:
    docs = [yaml.safe_load(p.read_text()) for p in sorted((repo_root / "crds").glob("*.yaml"))]
    assert {d["spec"]["names"]["kind"] for d in docs} == {"Trial", "VerificationCampaign", "ScoringRun"}
