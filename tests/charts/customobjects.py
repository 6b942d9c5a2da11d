"""Validation of the chart's custom objects (kinds that are not in the Kubernetes schemas) against their CRD.

``kubernetes-validate`` knows the built-in kinds only; a custom object is checked here the way the API server
does: the CRD's group, kind and scope, a served version, the version's ``openAPIV3Schema`` (JSON Schema;
the ``x-kubernetes-*`` keywords are ignored), no fields outside that schema (the server would drop them
silently), and ``metadata`` as a Kubernetes ObjectMeta (through ``kubernetes-validate``).
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
from jsonschema import Draft7Validator


def custom_object_errors(obj: dict[str, Any], crd: dict[str, Any], k8s_version: str) -> list[str]:
    """What is wrong with ``obj`` as an object of ``crd`` (empty: valid)."""
    spec = crd["spec"]
    group, _, version = obj["apiVersion"].partition("/")
    errors: list[str] = []
    if group != spec["group"] or obj.get("kind") != spec["names"]["kind"]:
        errors.append(f"{obj['apiVersion']}/{obj.get('kind')} is not {spec['group']}/{spec['names']['kind']}")
    served = {v["name"]: v for v in spec["versions"] if v.get("served")}
    if version not in served:
        return [*errors, f"version {version!r} is not served (served: {sorted(served)})"]
    if (spec["scope"] == "Namespaced") != bool(obj["metadata"].get("namespace")):
        errors.append(f"metadata.namespace does not fit the CRD's scope {spec['scope']}")
    schema = served[version]["schema"]["openAPIV3Schema"]
    errors += [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
               for e in Draft7Validator(schema).iter_errors(obj)]
    unknown = set(obj) - {"apiVersion", "kind", "metadata"} - set(schema.get("properties", {}))
    errors += [f"{field}: not in the CRD's schema (the API server would drop it)" for field in sorted(unknown)]
    try:
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]},
                                     k8s_version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        errors.append(f"metadata: {str(exc).splitlines()[0]}")
    return errors
