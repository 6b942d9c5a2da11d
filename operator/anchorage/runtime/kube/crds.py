"""CustomResourceDefinitions generated from the pydantic models (a pure builder).

``anchorage dev crds`` writes them to ``crds/`` and a test fails when the checked-in files drift
from the models; the API server (and the cluster fake of ``devcluster/``) validates with them.

The pydantic JSON schema is rewritten into a *structural* OpenAPI v3 schema: ``$ref`` inlined,
``Optional`` unwrapped, ``exclusiveMinimum`` in the OpenAPI 3.0 spelling, no ``title``/``default``
(defaults are applied by the models, so both drivers see the same values). Every field must carry
a description (``kubectl explain`` shows them): a field without one is a build error. Cross-field
rules of the models are restated as CEL rules (``x-kubernetes-validations``) with the same messages.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from anchorage.agentkinds import NEEDS_MODEL
from anchorage.manifests import (
    API_GROUP,
    API_VERSION,
    PLURALS,
    SHORT_NAMES,
    CampaignSpec,
    ScoringRunSpec,
    TrialSpec,
)
from anchorage.runtime.kube.status import SCORES_IN_STATUS, CampaignStatus, ScoringRunStatus, TrialStatus

Schema = dict[str, Any]

#: The list sizes the CEL cost estimator needs to accept the rules (bounded lists).
MAX_ITEMS = {"entries": 100, "tasks": 1000, "artifacts": 10000, "command": 256, "names": 1000,
             "conditions": 16, "scores": SCORES_IN_STATUS, "leaderboard": 100}

_AGENT_RULES = [
    {"rule": "self.kind != 'command' || (has(self.command) && size(self.command) > 0)",
     "message": "agent.kind 'command' needs agent.command, e.g. ['my-agent', '{instruction}']"},
    {"rule": "self.kind != 'replay' || has(self.artifact)",
     "message": "agent.kind 'replay' needs agent.artifact (a path or URI of the artifact to replay)"},
    {"rule": f"!(self.kind in [{', '.join(repr(k) for k in NEEDS_MODEL)}]) || has(self.model)",
     "message": f"agent.kind {', '.join(NEEDS_MODEL[:-1])} and {NEEDS_MODEL[-1]} need agent.model"},
]
_CAMPAIGN_RULES = [
    {"rule": "(has(self.tasks) && size(self.tasks) > 0) || has(self.taskSelector)",
     "message": "a campaign needs 'tasks' (a list of task names) or 'taskSelector'"},
    {"rule": "self.entries.all(e, self.entries.filter(f, f.name == e.name).size() == 1)",
     "message": "entry names must be unique"},
    {"rule": "!has(self.baseline) || self.entries.exists(e, e.name == self.baseline)",
     "message": "baseline must be the name of one of the entries"},
]
_SCORING_RULES = [
    {"rule": "(has(self.artifacts) && size(self.artifacts) > 0 ? 1 : 0) + (has(self.trialRef) ? 1 : 0)"
             " + (has(self.campaignRef) ? 1 : 0) == 1",
     "message": "a ScoringRun needs exactly one of 'artifacts', 'trialRef' or 'campaignRef'"},
    {"rule": "!(has(self.artifacts) && size(self.artifacts) > 0) || has(self.task)",
     "message": "'artifacts' needs 'task'"},
]
#: CEL rules by the pydantic model (schema title) they restate.
RULES: dict[str, list[dict[str, str]]] = {
    "AgentSpec": _AGENT_RULES, "CampaignSpec": _CAMPAIGN_RULES, "ScoringRunSpec": _SCORING_RULES,
}


class SchemaError(ValueError):
    """The models cannot be turned into a structural schema (e.g. a field has no description)."""


def _unwrap_optional(node: Schema) -> Schema:
    options = node.get("anyOf")
    if not options:
        return node
    concrete = [o for o in options if o.get("type") != "null"]
    if len(concrete) != 1:
        raise SchemaError(f"union types are not structural: {options}")
    merged = {k: v for k, v in node.items() if k != "anyOf"}
    merged.update(concrete[0])
    return merged


def _resolve(node: Schema, defs: Mapping[str, Schema]) -> Schema:
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        rest = {k: v for k, v in node.items() if k != "$ref"}
        target.update(rest)
        return target
    if "allOf" in node and len(node["allOf"]) == 1:
        target = _resolve(node["allOf"][0], defs)
        target.update({k: v for k, v in node.items() if k != "allOf"})
        return target
    return node


def _bounds(out: Schema) -> None:
    for key, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if key in out and not isinstance(out[key], bool):
            out[flag] = out.pop(key)
            out[key] = True


def structural(node: Schema, defs: Mapping[str, Schema], path: str = "") -> Schema:
    """Rewrite one pydantic JSON-schema node into a structural OpenAPI v3 schema node."""
    node = _unwrap_optional(_resolve(_unwrap_optional(node), defs))
    title = node.get("title")
    out: Schema = {k: v for k, v in node.items() if k not in ("title", "default", "additionalProperties")}
    if "const" in out:
        out["enum"] = [out.pop("const")]
        out.setdefault("type", "string")
    _bounds(out)
    if out.get("type") == "object":
        _object(out, node, defs, path)
    elif out.get("type") == "array":
        out["items"] = structural(node["items"], defs, f"{path}[]")
        leaf = path.rsplit(".", 1)[-1]
        if leaf in MAX_ITEMS:
            out["maxItems"] = MAX_ITEMS[leaf]
    if title in RULES:
        out["x-kubernetes-validations"] = copy.deepcopy(RULES[title])
    if path and not path.endswith("[]") and not out.get("description"):
        raise SchemaError(f"field '{path}' has no description; add Field(description=...) or a docstring")
    return out


def _object(out: Schema, node: Schema, defs: Mapping[str, Schema], path: str) -> None:
    props = node.get("properties")
    extra = node.get("additionalProperties")
    if props:
        out["properties"] = {
            name: structural(sub, defs, f"{path}.{name}" if path else name) for name, sub in props.items()
        }
    elif isinstance(extra, dict):
        extra_schema = structural({**extra, "description": "value"}, defs, f"{path}.*")
        extra_schema.pop("description", None)
        out["additionalProperties"] = extra_schema
    elif extra is True or not props:
        out["x-kubernetes-preserve-unknown-fields"] = True


def model_schema(model: type[BaseModel]) -> Schema:
    """The structural OpenAPI v3 schema of one pydantic model (by alias)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return structural(raw, defs)


def _columns(kind: str) -> list[Schema]:
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    phase = {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}
    cost = {"name": "Cost", "type": "number", "jsonPath": ".status.costUSD", "description": "USD"}
    if kind == "Trial":
        return [phase,
                {"name": "Task", "type": "string", "jsonPath": ".spec.task"},
                {"name": "Entry", "type": "string", "jsonPath": ".spec.entry"},
                {"name": "Seed", "type": "integer", "jsonPath": ".spec.seed"},
                {"name": "O-Eval", "type": "number", "jsonPath": ".status.oEval"},
                cost,
                {"name": "Reason", "type": "string", "jsonPath": ".status.reason", "priority": 1},
                {"name": "Queue", "type": "string", "jsonPath": ".status.queue", "priority": 1},
                {"name": "Position", "type": "integer", "jsonPath": ".status.queuePosition", "priority": 1},
                age]
    if kind == "VerificationCampaign":
        return [phase,
                {"name": "Progress", "type": "string", "jsonPath": ".status.progress"},
                {"name": "Best", "type": "string", "jsonPath": ".status.bestEntry"},
                {"name": "O-Eval", "type": "number", "jsonPath": ".status.bestOEval"},
                cost,
                {"name": "Unknown Costs", "type": "integer", "jsonPath": ".status.costsUnknown",
                 "description": "trials whose cost could not be read (not in Cost, which is then a lower bound)"},
                age]
    return [phase,
            {"name": "Task", "type": "string", "jsonPath": ".spec.task"},
            {"name": "Trial", "type": "string", "jsonPath": ".spec.trialRef"},
            {"name": "O-Eval", "type": "number", "jsonPath": ".status.oEval"},
            age]


_DOCS = {
    "Trial": "One agent run on one task with one seed, in an isolated, resource-limited pod.",
    "VerificationCampaign": "A matrix of entries × tasks × seeds, run as Trials and scored into a leaderboard.",
    "ScoringRun": "Scores artifacts of a task: a Trial's, a campaign's, or external ones.",
}
_MODELS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "Trial": (TrialSpec, TrialStatus),
    "VerificationCampaign": (CampaignSpec, CampaignStatus),
    "ScoringRun": (ScoringRunSpec, ScoringRunStatus),
}


def apply_ceilings(spec: Schema, ceilings: Mapping[str, float]) -> None:
    """Lower the ``maximum`` of every ``limits.<field>`` to the cluster's configured ceiling."""
    for field, ceiling in ceilings.items():
        for limits in _find_limits(spec):
            prop = limits["properties"].get(field)
            if prop is None:
                raise SchemaError(f"unknown limit '{field}' (known: {', '.join(limits['properties'])})")
            prop["maximum"] = min(prop.get("maximum", ceiling), ceiling)


def _find_limits(node: Schema) -> list[Schema]:
    found = []
    for name, sub in node.get("properties", {}).items():
        if name == "limits":
            found.append(sub)
        found.extend(_find_limits(sub))
    if "items" in node:
        found.extend(_find_limits(node["items"]))
    return found


def crd(kind: str, ceilings: Mapping[str, float] | None = None) -> Schema:
    """The CustomResourceDefinition of ``kind`` (Trial, VerificationCampaign or ScoringRun)."""
    spec_model, status_model = _MODELS[kind]
    plural = PLURALS[kind]
    spec = model_schema(spec_model)
    if ceilings:
        apply_ceilings(spec, ceilings)
    spec["description"] = spec_model.__doc__ or kind
    status = model_schema(status_model)
    schema = {
        "type": "object",
        "description": _DOCS[kind],
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "anchorage.dev/v1alpha1"},
            "kind": {"type": "string", "description": kind},
            "metadata": {"type": "object"},  # a description here is refused by the API server
            "spec": spec,
            "status": status,
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{API_GROUP}", "labels": {"app.kubernetes.io/part-of": "anchorage"}},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List",
                      "shortNames": [SHORT_NAMES[kind]], "categories": ["anchorage"]},
            "versions": [{
                "name": API_VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": _columns(kind),
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    }


def all_crds(ceilings: Mapping[str, float] | None = None) -> dict[str, Schema]:
    """File name → CRD, for every kind."""
    return {f"{API_GROUP}_{PLURALS[k]}.yaml": crd(k, ceilings) for k in _MODELS}


#: Where ``anchorage dev crds`` writes :func:`peering_crd` (a subfolder: ``kubectl apply -f crds/`` and the
#: chart's CRDs leave it out; ``kubectl apply -f crds/peering/`` installs it for ``anchorage operator``
#: without ``--standalone``).
PEERING_FILE = "peering/kopf.dev_kopfpeerings.yaml"
#: Where it writes :func:`peering_crd` ``(cluster=True)``: kopf's ClusterKopfPeering, for ``--all-namespaces``.
CLUSTER_PEERING_FILE = "peering/kopf.dev_clusterkopfpeerings.yaml"


def peering_crd(*, cluster: bool = False) -> Schema:
    """The ``KopfPeering`` CRD kopf's namespaced peering needs, or with ``cluster`` the ``ClusterKopfPeering`` CRD of
    its cluster-wide peering (an operator serving every namespace); kopf's wheel does not ship their definitions.

    kopf keeps each operator's keep-alive under ``status.<identity>`` of a peering object it patches
    (no status subresource); the object itself (named ``anchorage``: in each watched namespace, or one for the
    cluster) is created by the cluster's admin (the chart), as kopf does not create it.
    """
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
              "description": "Keep-alives of the operators, by operator identity (written by kopf)."}
    kind = "ClusterKopfPeering" if cluster else "KopfPeering"
    where = "in the cluster (operators serving every namespace)" if cluster else "in this namespace"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.lower()}s.kopf.dev", "labels": {"app.kubernetes.io/part-of": "anchorage"}},
        "spec": {
            "group": "kopf.dev",
            "scope": "Cluster" if cluster else "Namespaced",
            "names": {"kind": kind, "plural": f"{kind.lower()}s", "singular": kind.lower(),
                      "listKind": f"{kind}List"},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "additionalPrinterColumns": [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object", "description": f"Which kopf operators are alive {where}.",
                    "properties": {"status": status}}},
            }],
        },
    }
