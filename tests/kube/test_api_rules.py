"""The rules that bit the operator on a real API server, checked on the real control plane and on the fake alike.

Each test runs ``[real]`` (the session's kube-apiserver, ``tests/kube_cluster.py``) and ``[fake]`` (the
cluster fake started with token authentication), so the fake keeps enforcing what the real server does:
authentication (a wrong token is 401, no token is ``system:anonymous``: 403), the structural-schema rules
of CRDs (nothing but ``type`` on the root ``metadata``, a ``type`` on every field), names and label values
of at most 63 characters (a Job's name becomes its pods' label value), and ``kubectl get -w`` decoding the
watch stream.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from anchorage_devcluster.serving import ClusterThread
from kube_cluster import kubectl_env

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Api:
    """A cluster under test: kubectl's environment, the server URL, the CA to trust (None: plain HTTP)."""

    name: str
    env: dict[str, str]
    url: str
    ca: Path | None

    def kubectl(self, *args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
        text = yaml.safe_dump(stdin) if isinstance(stdin, dict) else stdin
        return subprocess.run(["kubectl", *args], env=self.env, input=text, capture_output=True, text=True,
                              timeout=60)

    def raw(self, path: str, token: str | None) -> int:
        """The status of a GET with ``token`` (None: no Authorization header)."""
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {token}"} if token else {})
        context = ssl.create_default_context(cafile=str(self.ca)) if self.ca else None
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)


@pytest.fixture(scope="module", params=["fake", pytest.param("real", marks=pytest.mark.cluster)])
def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    root = tmp_path_factory.mktemp(f"rules-{request.param}")
    if request.param == "real":
        real = request.getfixturevalue("real_cluster")
        real.namespace("rules")
        yield Api("real", real.env(), real.local.plane.url, real.local.plane.ca)
        return
    with ClusterThread(root / "kubeconfig", namespaces=("rules",), authenticate=True) as cluster:
        yield Api("fake", kubectl_env({**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "HOME": str(root)}),
                  cluster.url, cluster.ca)


def test_requests_without_valid_credentials_are_refused(api: Api) -> None:
    assert api.raw("/api/v1/namespaces/rules/configmaps", None) == 403  # system:anonymous
    assert api.raw("/api/v1/namespaces/rules/configmaps", "not-a-token") == 401
    assert api.raw("/version", None) == 200  # public to anonymous users
    assert api.kubectl("get", "configmaps", "-n", "rules").returncode == 0  # with the kubeconfig's credentials


def _crd(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((REPO / "crds" / "anchorage.dev_trials.yaml").read_text())
    plural = f"{name}s"
    doc["metadata"]["name"] = f"{plural}.rules.anchorage.dev"
    doc["spec"]["group"] = "rules.anchorage.dev"
    doc["spec"]["names"] = {"kind": name.capitalize(), "plural": plural, "singular": name, "listKind": f"{name}List"}
    return doc


def _broken(change: str) -> dict[str, Any]:
    doc = _crd("broken")
    schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    if change == "metadata-description":
        schema["properties"]["metadata"]["description"] = "Standard object metadata."
    elif change == "untyped-field":
        del schema["properties"]["spec"]["properties"]["seed"]["type"]
    return doc


@pytest.mark.parametrize(("change", "fragment"), [
    ("metadata-description", "must not specify anything other than name and generateName"),
    ("untyped-field", "type: Required value: must not be empty for specified object fields"),
], ids=["metadata-description", "untyped-field"])
def test_crds_must_be_structural(api: Api, change: str, fragment: str) -> None:
    result = api.kubectl("apply", "--dry-run=server", "-f", "-", stdin=_broken(change))
    assert result.returncode != 0 and fragment in result.stderr, result.stderr
    fine = api.kubectl("apply", "--dry-run=server", "-f", "-", stdin=_crd("fine"))
    assert fine.returncode == 0, fine.stderr


def _job(name: str, labels: dict[str, str]) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "command": ["true"],
                 "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 1000,
                                     "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "rules", "labels": labels},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}


@pytest.mark.parametrize(("name", "labels", "fragment"), [
    ("j" * 64, {}, "must be no more than 63 characters"),
    ("ok", {"anchorage.dev/trial": "t" * 64}, "must be no more than 63 characters"),
    ("ok", {"anchorage.dev/trial": "bad value"}, "a valid label must be an empty string or consist of alphanumeric"),
], ids=["job-name-64", "label-value-64", "label-value-space"])
def test_names_and_label_values_are_limited(api: Api, name: str, labels: dict[str, str], fragment: str) -> None:
    result = api.kubectl("apply", "--dry-run=server", "-f", "-", stdin=_job(name, labels))
    assert result.returncode != 0 and "is invalid" in result.stderr and fragment in result.stderr, result.stderr
    at_limit = api.kubectl("apply", "--dry-run=server", "-f", "-", stdin=_job("j" * 63, {"anchorage.dev/trial": "t" * 63}))
    assert at_limit.returncode == 0, at_limit.stderr


def test_kubectl_get_watch_decodes_the_stream(api: Api) -> None:
    proc = subprocess.Popen(["kubectl", "get", "configmaps", "-n", "rules", "-w", "-o", "name"], env=api.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2)
        created = api.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"},
                                                         "metadata": {"name": "watched", "namespace": "rules"}})
        assert created.returncode == 0, created.stderr
        deadline = time.monotonic() + 30
        seen = ""
        assert proc.stdout is not None
        while time.monotonic() < deadline and "configmap/watched" not in seen:
            seen += proc.stdout.readline()
        assert "configmap/watched" in seen
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        api.kubectl("delete", "configmap", "watched", "-n", "rules")
    assert "unable to decode" not in err and "error" not in err.lower(), err
