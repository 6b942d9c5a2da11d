"""The cluster fake evaluates the CRDs' own CEL rules (x-kubernetes-validations), driven through kubectl apply."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from anchorage_devcluster.serving import ClusterThread, load_crd_docs

REPO = Path(__file__).resolve().parents[2]
API = "anchorage.dev/v1alpha1"


def _rules(node: dict[str, Any], path: str) -> Iterator[tuple[str, str, str]]:
    for entry in node.get("x-kubernetes-validations") or []:
        yield path, entry["rule"], entry["message"]
    for name, sub in (node.get("properties") or {}).items():
        yield from _rules(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _rules(node["items"], f"{path}[*]")


def crd_rules() -> list[tuple[str, str, str, str]]:
    """(kind, schema path, rule, message) of every CEL rule in crds/."""
    found = []
    for crd in load_crd_docs(REPO / "crds"):
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        found += [(crd["spec"]["names"]["kind"], *rule) for rule in _rules(schema, "")]
    return found


AGENTS = [  # (rule, violating agent, valid agent)
    ("self.kind != 'command' || (has(self.command) && size(self.command) > 0)",
     {"kind": "command"}, {"kind": "command", "command": ["my-agent", "{instruction}"]}),
    ("self.kind != 'replay' || has(self.artifact)", {"kind": "replay"}, {"kind": "replay", "artifact": "/tmp/a.json"}),
    ("!(self.kind in ['claude-code', 'codex', 'opencode']) || has(self.model)", {"kind": "codex"},
     {"kind": "codex", "model": "gpt-test"}),
]
ORACLE = {"kind": "oracle"}


def _campaign(**spec: Any) -> dict[str, Any]:
    return {"tasks": ["smoke-inventory"], "entries": [{"name": "a", "agent": ORACLE}], **spec}


#: (kind, rule) → (violating spec, valid spec): one case per CEL rule in crds/ (a new rule needs a case here).
CASES: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {
    **{("Trial", rule): ({"task": "smoke-inventory", "agent": bad}, {"task": "smoke-inventory", "agent": good})
       for rule, bad, good in AGENTS},
    **{("VerificationCampaign", rule): (_campaign(entries=[{"name": "a", "agent": bad}]),
                                        _campaign(entries=[{"name": "a", "agent": good}]))
       for rule, bad, good in AGENTS},
    ("VerificationCampaign", "(has(self.tasks) && size(self.tasks) > 0) || has(self.taskSelector)"):
        ({"entries": [{"name": "a", "agent": ORACLE}]},
         {"taskSelector": {"names": ["smoke-*"]}, "entries": [{"name": "a", "agent": ORACLE}]}),
    ("VerificationCampaign", "self.entries.all(e, self.entries.filter(f, f.name == e.name).size() == 1)"):
        (_campaign(entries=[{"name": "a", "agent": ORACLE}, {"name": "a", "agent": ORACLE}]),
         _campaign(entries=[{"name": "a", "agent": ORACLE}, {"name": "b", "agent": ORACLE}])),
    ("VerificationCampaign", "!has(self.baseline) || self.entries.exists(e, e.name == self.baseline)"):
        (_campaign(baseline="nobody"), _campaign(baseline="a")),
    ("ScoringRun", "(has(self.artifacts) && size(self.artifacts) > 0 ? 1 : 0) + (has(self.trialRef) ? 1 : 0) + "
                   "(has(self.campaignRef) ? 1 : 0) == 1"):
        ({"trialRef": "t1", "campaignRef": "c1"}, {"trialRef": "t1"}),
    ("ScoringRun", "!(has(self.artifacts) && size(self.artifacts) > 0) || has(self.task)"):
        ({"artifacts": [{"uri": "file:///tmp/a.json", "entry": "x"}]},
         {"task": "smoke-inventory", "artifacts": [{"uri": "file:///tmp/a.json", "entry": "x"}]}),
}


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH (these tests drive the fake with it)")
    root = tmp_path_factory.mktemp("cel")
    with ClusterThread(root / "kubeconfig", crds_dir=REPO / "crds", kubelet=False) as cluster:
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "HOME": str(root)}

        def run(*args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
            text = yaml.safe_dump_all(stdin if isinstance(stdin, list) else [stdin]) if stdin is not None else None
            return subprocess.run(["kubectl", *args], env=env, input=text, capture_output=True, text=True, timeout=60)
        yield run


def _doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def test_every_rule_in_crds_has_a_case() -> None:
    assert sorted((kind, rule) for kind, _, rule, _ in crd_rules()) == sorted(CASES)


@pytest.mark.parametrize(("kind", "path", "rule", "message"), crd_rules(),
                         ids=[f"{k}{p}:{r[:30]}" for k, p, r, _ in crd_rules()])
def test_each_crd_rule_rejects_a_violation_and_accepts_a_valid_object(kubectl: Any, kind: str, path: str, rule: str,
                                                                      message: str) -> None:
    bad, good = CASES[(kind, rule)]
    name = f"cel-{abs(hash((kind, path, rule))) % 10**8}"
    rejected = kubectl("apply", "-f", "-", stdin=_doc(kind, name, bad))
    assert rejected.returncode != 0 and message in rejected.stderr, rejected.stderr
    field = path.lstrip(".").replace("[*]", "[0]")
    assert f"{field}: Invalid value: \"object\": {message}" in rejected.stderr
    accepted = kubectl("apply", "-f", "-", stdin=_doc(kind, name, good))
    assert accepted.returncode == 0, accepted.stderr
    kubectl("delete", kind.lower(), name)


def _trial_crd_with(rules: list[dict[str, Any]], where: str = "spec") -> dict[str, Any]:
    crd = copy.deepcopy(next(d for d in load_crd_docs(REPO / "crds") if d["spec"]["names"]["kind"] == "Trial"))
    node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][where]
    node.setdefault("x-kubernetes-validations", []).extend(rules)
    return crd


def test_a_rule_added_to_the_crd_is_enforced_though_no_model_has_it(kubectl: Any) -> None:
    """Fails if the fake ran the pydantic models instead of the CRD's rules: seed 13 is valid for the models."""
    extra = [{"rule": "self.seed != 13", "messageExpression": "'seed ' + string(self.seed) + ' is unlucky'",
              "fieldPath": ".seed"},
             {"rule": "!has(self.entry) || self.entry.lowerAscii() == self.entry", "reason": "FieldValueForbidden",
              "message": "entry must be lower case"},
             {"rule": "self.task == oldSelf.task", "message": "task is immutable"},
             # limits.cpus is a `number`: a double in CEL, compared with an int literal as Kubernetes does
             {"rule": "!has(self.limits) || !has(self.limits.cpus) || self.limits.cpus != 3", "message": "no 3 cpus"}]
    try:
        assert kubectl("apply", "-f", "-", stdin=_trial_crd_with(extra)).returncode == 0
        trial = _doc("Trial", "lucky", {"task": "smoke-inventory", "agent": ORACLE, "seed": 13})
        rejected = kubectl("apply", "-f", "-", stdin=trial)
        assert rejected.returncode != 0 and "spec.seed: Invalid value: \"object\": seed 13 is unlucky" in rejected.stderr
        upper = _doc("Trial", "lucky", {"task": "smoke-inventory", "agent": ORACLE, "entry": "Big"})
        assert "spec: Forbidden: entry must be lower case" in kubectl("apply", "-f", "-", stdin=upper).stderr
        three = kubectl("apply", "-f", "-", stdin={**trial, "spec": {**trial["spec"], "seed": 12, "limits": {"cpus": 3}}})
        assert three.returncode != 0 and 'spec: Invalid value: "object": no 3 cpus' in three.stderr, three.stderr
        assert kubectl("apply", "-f", "-", stdin={**trial, "spec": {**trial["spec"], "seed": 12}}).returncode == 0
        moved = kubectl("apply", "-f", "-", stdin={**trial, "spec": {**trial["spec"], "seed": 12, "task": "other"}})
        assert moved.returncode != 0 and "task is immutable" in moved.stderr  # transition rule (oldSelf) on update
        assert json.loads(kubectl("get", "tr", "lucky", "-o", "json").stdout)["spec"]["task"] == "smoke-inventory"
        kubectl("delete", "tr", "lucky")
    finally:  # put the checked-in CRD back for the other tests of this module
        kubectl("apply", "-f", "-", stdin=_trial_crd_with([]))


@pytest.mark.parametrize(("rule", "fragment"), [
    ("quantity(self.task).isGreaterThan(quantity('1'))", "calls quantity()"),
    ("self.task.?x == 'a'", "does not compile"),
    ("request.user == 'x'", "refers to 'request'"),
], ids=["kubernetes-quantity-library", "optional-syntax", "unknown-variable"])
def test_a_rule_the_fake_cannot_evaluate_fails_the_crd(kubectl: Any, rule: str, fragment: str) -> None:
    result = kubectl("apply", "-f", "-", stdin=_trial_crd_with([{"rule": rule, "message": "x"}]))
    assert result.returncode != 0 and "CustomResourceDefinition" in result.stderr and fragment in result.stderr
    trial = _doc("Trial", "after-bad-crd", {"task": "smoke-inventory", "agent": ORACLE})
    assert kubectl("apply", "--dry-run=server", "-f", "-", stdin=trial).returncode == 0  # the old CRD still serves


def test_errors_inside_macros_stay_small() -> None:
    """cel-python quoted both errors of ``error || error`` in a new one: over a list inside exists() the
    text doubled per element (a 40-entry campaign without a baseline took gigabytes in the fake)."""
    from anchorage_devcluster import cel

    node = cel.compile_schema({"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}},
                               "x-kubernetes-validations": [{"rule": "self.names.exists(n, n == self.missing)"}]})
    [cause] = cel.validate(node, {"names": [f"n{i}" for i in range(12)]})
    assert "no such member" in cause["message"] and len(cause["message"]) < 500
    campaign = _campaign(entries=[{"name": f"e{i}", "agent": ORACLE} for i in range(100)])  # maxItems, no baseline
    [crd] = [d for d in load_crd_docs(REPO / "crds") if d["spec"]["names"]["kind"] == "VerificationCampaign"]
    rules = cel.compile_schema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    assert cel.validate(rules, {"spec": campaign}) == []
