"""Anchorage installed as a platform engineer installs it: images published with ``anchorage images push``, the chart
with only a registry value, and pulls from a registry that asks for credentials.

On the session cluster (``tests/kube_cluster.py``: real nodes, the registry on the cluster's bridge):

* ``anchorage images push --registry R`` (the product command, as a subprocess) puts the four images at
  ``R/anchorage/<name>:<the chart's appVersion>`` and prints digests the registry agrees with;
* a release installed with ``global.imageRegistry=R`` as its only image value runs ``examples/trial.yaml`` (applied
  with ``kubectl -n``) to Succeeded with O-Eval 1: every pod ran ``R/anchorage/*:<appVersion>``, the task came from
  the task bundle image, no pod mounts a host folder or names the checkout, and the agent container holds no
  credential while the store's containers hold the ServiceAccount's projected token;
* a second registry on the bridge asks for credentials (htpasswd): a push without them fails, with them it works; a
  pod without the pull secret gets the kubelet's ErrImagePull / ImagePullBackOff (its event says unauthorized), the
  same pod with the secret pulls and runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_cluster import REAL_NODES, RealCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]  # slow: a second release and a trial on real nodes, ~3 min
REPO = Path(__file__).resolve().parents[2]
NAMES = ("agent-base", "verifier", "operator", "tasks")


def _chart_version() -> str:
    return str(yaml.safe_load((REPO / "charts" / "anchorage" / "Chart.yaml").read_text())["appVersion"])


def _anchorage(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The product's command from this checkout (its package first on the path), as a user runs it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", "from anchorage.cli import main; main()", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1800, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"anchorage {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def _manifest_digest(registry: str, repository: str, tag: str) -> str:
    accept = ", ".join(("application/vnd.docker.distribution.manifest.v2+json",
                        "application/vnd.oci.image.manifest.v1+json"))
    request = urllib.request.Request(f"http://{registry}/v2/{repository}/manifests/{tag}", method="HEAD",
                                     headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.headers["Docker-Content-Digest"])


def _push(registry: str, *extra: str) -> dict[str, dict[str, str]]:
    done = _anchorage("images", "push", "--registry", registry, "--tls-verify=false", "--disable-compression",
                      "--json", *extra)
    pushed: dict[str, dict[str, str]] = json.loads(done.stdout)
    return pushed


def _wait_phase(real: RealCluster, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        out = real.kubectl("get", "trial", name, "-n", namespace, "-o", "json", check=False)
        status = (json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}
        if status.get("phase") in ("Succeeded", "Failed", "InfrastructureFailed", "Cancelled"):
            return status
        time.sleep(2)
    pods = real.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
    raise AssertionError(f"trial {namespace}/{name} did not end within {timeout:.0f} s: {status}\n{pods}")


def test_pushed_images_and_a_release_with_only_the_registry_value_run_the_example_trial(
        real_cluster: RealCluster) -> None:
    registry, version = real_cluster.registry, _chart_version()
    pushed = _push(registry)
    assert sorted(pushed) == sorted(NAMES)
    for name, image in pushed.items():
        assert (image["repository"], image["tag"]) == (f"{registry}/anchorage/{name}", version)
        assert image["digest"] == _manifest_digest(registry, f"anchorage/{name}", version), name

    release = real_cluster.install("byregistry", "byregistry", "byregistry-trials", registry_only=True)
    try:
        real_cluster.wait_available(release.namespace)
        doc = yaml.safe_load((REPO / "examples" / "trial.yaml").read_text())
        real_cluster.kubectl("apply", "-f", str(REPO / "examples" / "trial.yaml"), "-n", release.namespace)
        status = _wait_phase(real_cluster, release.namespace, doc["metadata"]["name"], 600)
        assert status["phase"] == "Succeeded" and status["oEval"] == 1.0, status

        expected = {f"{registry}/anchorage/{name}:{version}" for name in NAMES}
        pods = [*real_cluster.get("pods", "-n", release.namespace)["items"],
                *real_cluster.get("pods", "-n", release.trials_namespace)["items"]]
        roles = {p["metadata"]["labels"].get("anchorage.dev/role") for p in pods}
        assert {"trial", "verifier"} <= roles, roles
        for pod in pods:
            spec = pod["spec"]
            containers = [*spec.get("initContainers", []), *spec["containers"]]
            assert {c["image"] for c in containers} <= expected, (pod["metadata"]["name"], containers)
            assert not [v for v in spec.get("volumes", []) if "hostPath" in v], pod["metadata"]["name"]
            assert str(REPO) not in json.dumps(spec), f"{pod['metadata']['name']} names the checkout"
            if pod["metadata"]["namespace"] == release.trials_namespace:
                assert spec["nodeName"] in REAL_NODES
        operator = next(p for p in pods if p["metadata"]["labels"].get("app.kubernetes.io/component") == "operator")
        assert [c["image"] for c in operator["spec"]["initContainers"]] == [f"{registry}/anchorage/tasks:{version}"]

        trial = next(p for p in pods if p["metadata"]["labels"].get("anchorage.dev/role") == "trial")
        init = {c["name"]: c for c in trial["spec"]["initContainers"]}
        assert init["fetch-task"]["image"] == f"{registry}/anchorage/tasks:{version}"  # the task from the bundle
        agent = next(c for c in trial["spec"]["containers"] if c["name"] == "agent")
        assert not [m for m in agent.get("volumeMounts", []) if m["mountPath"].startswith("/var/run/secrets")]
        assert not [e for e in agent.get("env", []) if e["name"].startswith("AWS_")] and "envFrom" not in agent
        assert trial["spec"]["serviceAccountName"].endswith("-store-client")
        assert [m["mountPath"] for m in init["upload"]["volumeMounts"] if m["name"] == "store-token"] == [
            "/var/run/secrets/anchorage/store"]
    finally:
        _uninstall(real_cluster, release.name, release.namespace)


def _uninstall(real: RealCluster, release: str, namespace: str) -> None:
    import asyncio

    import helm_sdkpy

    config = helm_sdkpy.Configuration(namespace=namespace, kubeconfig=str(real.admin_kubeconfig))
    asyncio.run(helm_sdkpy.Uninstall(config).run(release, wait=False, timeout=120))
    real.releases.pop(release, None)


def _pod(name: str, image: str, secret: str | None) -> dict[str, Any]:
    restricted = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 10004,
                  "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    spec: dict[str, Any] = {"restartPolicy": "Never", "automountServiceAccountToken": False,
                            "containers": [{"name": "main", "image": image, "imagePullPolicy": "Always",
                                            "command": ["anchorage", "--version"], "securityContext": restricted}]}
    if secret:
        spec["imagePullSecrets"] = [{"name": secret}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_a_registry_that_asks_for_credentials_pulls_only_with_the_pull_secret(real_cluster: RealCluster,
                                                                               tmp_path: Path) -> None:
    private = real_cluster.private_registry()
    refused = _anchorage("images", "push", "--registry", private.address, "--tls-verify=false",
                         "--disable-compression", "operator", check=False)
    assert refused.returncode == 3 and "unauthorized" in refused.stderr.lower(), refused.stderr[-2000:]
    auth = private.auth_file(tmp_path / "auth.json")
    image = _push(private.address, "--authfile", str(auth), "operator")["operator"]
    reference = f"{image['repository']}:{image['tag']}"

    namespace = real_cluster.namespace("private-pulls")
    real_cluster.kubectl("create", "secret", "docker-registry", "private-pull", "-n", namespace,
                         f"--docker-server={private.address}", f"--docker-username={private.user}",
                         f"--docker-password={private.password}")
    real_cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(_pod("without", reference, None)))
    real_cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(_pod("with", reference,
                                                                                    "private-pull")))

    def waiting_reason() -> str | None:
        pod = real_cluster.get("pod", "without", "-n", namespace)
        for status in pod["status"].get("containerStatuses") or []:
            return str((status["state"].get("waiting") or {}).get("reason"))
        return None

    real_cluster.wait_for(lambda: waiting_reason() in ("ErrImagePull", "ImagePullBackOff"), 120,
                          "the pod without the pull secret to fail its pull")
    events = real_cluster.get("events", "-n", namespace, "--field-selector", "involvedObject.name=without")["items"]
    failed = [e for e in events if e["reason"] == "Failed" and e["source"].get("component") == "kubelet"]
    assert failed and any("unauthorized" in e["message"].lower() for e in failed), events

    real_cluster.wait_for(lambda: real_cluster.get("pod", "with", "-n", namespace)["status"].get("phase") == "Succeeded",
                          180, "the pod with the pull secret to pull and run")
    logs = real_cluster.kubectl("logs", "with", "-n", namespace).stdout
    assert logs.startswith("anchorage "), logs
    real_cluster.kubectl("delete", "namespace", namespace, "--wait=false")
