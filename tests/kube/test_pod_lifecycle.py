"""A trial pod's life on real nodes, as the operator runs it (issues 25 and 26).

On the session cluster (``tests/kube_cluster.py``: two real nodes, kube-router as the NetworkPolicy engine, CoreDNS,
the chart's operator and gateway as pods, the S3 store as a pod):

* **egress** — a probe trial (a ``command`` agent, Python in the agent image) tries TCP to etcd, the API server, the
  gateway's admin port, another trial's pod, the node's kubelet, a listener on this machine, CoreDNS, the store, and
  the gateway's model port: only the gateway's model port answers (its name through ``hostAliases``; no other name
  resolves). The same probe as a pod in a namespace without the policies reaches what was blocked (kube-router blocks,
  nothing else), a verifier-role pod reaches DNS and the store only, and under the policies the chart renders with its
  default values an agent reaches the gateway only. The probe's own results reach the store: the upload after the
  agent (the operator's ``store-access`` label) works.
* **platform failures** — a missing RuntimeClass, an image tag the registry lacks, a request no node fits, a
  ResourceQuota refusal: each ends ``InfrastructureFailed`` with its reason and the object that says so, retried once,
  never scored (a campaign's leaderboard counts it as an infrastructure failure, not a zero);
* **the agent's time starts with its container** — a trial kept from being scheduled for longer than its whole
  timeout still runs its agent its full time;
* **a lost node** — in ``tests/kube/test_real_node_loss.py`` (a campaign's trials on a third node that is lost);
* **the policies are kept** — a deleted or edited policy comes back.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube.test_real_node import _wait_phase
from kube_cluster import REAL_NODES, RealCluster

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]

#: The probe: TCP connections, one DNS question, name lookups; each target "open" or "closed: why". Argv: the targets
#: (JSON), then where to write the results (also printed).
PROBE = r"""
import concurrent.futures, json, socket, struct, sys

def tcp(host, port):
    with socket.create_connection((host, port), timeout=3):
        return "open"

def dns(host, port):
    query = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"".join(
        bytes([len(p)]) + p.encode() for p in "kubernetes.default.svc.cluster.local".split(".")) + b"\0\0\1\0\1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(3)
        sock.sendto(query, (host, port))
        sock.recv(512)
        return "open"

def resolve(host, port):
    return "open: " + socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]

def check(target):
    try:
        return target["name"], {"tcp": tcp, "dns": dns, "resolve": resolve}[target["kind"]](target["host"], target["port"])
    except Exception as exc:
        return target["name"], "closed: %s: %s" % (type(exc).__name__, exc)

targets = json.loads(sys.argv[1])
with concurrent.futures.ThreadPoolExecutor(len(targets)) as pool:
    found = dict(pool.map(check, targets))
text = json.dumps(found, sort_keys=True)
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as out:
        out.write(text)
print(text)
"""
LISTEN = "import socket, time\ns = socket.socket()\ns.bind(('0.0.0.0', 8000))\ns.listen(8)\ntime.sleep(600)\n"
#: Closed in every namespace: etcd listens on this machine's loopback only (issue 25), and a pod's own loopback has no
#: etcd; the listener trial's pod denies every ingress itself (P1 selects it).
CLOSED_BY_DESIGN = {"etcd (bridge)", "etcd (pod loopback)", "another trial's pod"}
GATEWAY = {"gateway model port (by name)", "gateway name resolves"}


def _open(results: dict[str, str]) -> set[str]:
    return {name for name, result in results.items() if result.startswith("open")}


def _json(real: RealCluster, *args: str) -> Any:
    return real.get(*args)


@contextlib.contextmanager
def _host_listener(address: str) -> Iterator[int]:
    """A TCP listener on this machine's every address (the probe tries it at the cluster bridge's address)."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    server.settimeout(0.5)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                server.accept()[0].close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        server.close()


def _apply(real: RealCluster, doc: dict[str, Any]) -> None:
    real.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(doc))


def _trial(real: RealCluster, name: str, agent: dict[str, Any], **spec: Any) -> None:
    release = real.release
    _apply(real, {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial",
                  "metadata": {"name": name, "namespace": release.namespace},
                  "spec": {"task": "smoke-inventory", "agent": agent, **spec}})


def _trial_pods(real: RealCluster, name: str) -> list[dict[str, Any]]:
    pods = _json(real, "pods", "-n", real.release.trials_namespace, "-l", "anchorage.dev/role=trial")["items"]
    return [p for p in pods if (p["metadata"].get("annotations") or {}).get("anchorage.dev/trial") == name]


def _remove_pods(real: RealCluster, *, trials: tuple[str, ...] = (), campaign: str | None = None) -> None:
    """Force-delete the trial pods of ``trials`` (or of ``campaign``) once a test is done with them. A pod deleted
    before its agent ran (an attempt ended for the platform: its image, its node) keeps its node's CPU for about 80 s
    (its upload sidecar waits 60 s for a store its policy keeps closed), and the next test's pods would wait for it."""
    pods = _json(real, "pods", "-n", real.release.trials_namespace, "-l", "anchorage.dev/role=trial")["items"]
    names = [p["metadata"]["name"] for p in pods
             if (p["metadata"].get("annotations") or {}).get("anchorage.dev/trial") in trials
             or (campaign and (p["metadata"].get("labels") or {}).get("anchorage.dev/campaign") == campaign)]
    if names:
        real.kubectl("delete", "pod", "-n", real.release.trials_namespace, *names, "--grace-period=0", "--force",
                     "--wait=false", check=False)


def _wait_pod(real: RealCluster, namespace: str, name: str, phases: tuple[str, ...], timeout: float) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def there() -> bool:
        nonlocal found
        out = real.kubectl("get", "pod", name, "-n", namespace, "-o", "json", check=False)
        found = json.loads(out.stdout) if out.returncode == 0 else {}
        return (found.get("status") or {}).get("phase") in phases

    real.wait_for(there, timeout, f"pod {namespace}/{name} in {phases}")
    return found


def _probe_pod(real: RealCluster, namespace: str, name: str, targets: list[dict[str, Any]],
               labels: dict[str, str], *, policed: bool = True, **spec: Any) -> None:
    """A bare pod running the probe. ``policed``: first the operator's ``await-policy`` init container, as a trial's
    agent waits for it (the policy engine applies a new pod's policies about a second after its start; a bare pod
    probing at once would race it — the trial's own probe shows the operator's pods do not)."""
    restricted = {"runAsNonRoot": True, "runAsUser": 65532, "allowPrivilegeEscalation": False,
                  "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    wait = [{"name": "await-policy", "image": real.images["operator"], "securityContext": restricted,
             "command": ["python", "-m", "anchorage.runtime.kube.pod", "await-policy", "--seconds", "60"],
             "resources": {"limits": {"cpu": "100m", "memory": "96Mi"}}}] if policed else []
    _apply(real, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                                  "labels": labels},
                  "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False, "initContainers": wait,
                           "containers": [{"name": "probe", "image": real.images["agent-base"],
                                           "command": ["python3", "-c", PROBE, json.dumps(targets)],
                                           "securityContext": restricted,
                                           "resources": {"limits": {"cpu": "200m", "memory": "128Mi"}}}],
                           **spec}})


def _probe_result(real: RealCluster, namespace: str, name: str) -> dict[str, str]:
    _wait_pod(real, namespace, name, ("Succeeded", "Failed"), 180)
    logs = real.kubectl("logs", "-n", namespace, name).stdout.strip().splitlines()
    result: dict[str, str] = json.loads(logs[-1])
    return result


@pytest.fixture(scope="module")
def places(real_cluster: RealCluster) -> dict[str, Any]:
    """The addresses the probes try: the cluster bridge (API server, etcd), the gateway, the store, a node."""
    release = real_cluster.release
    config = yaml.safe_load(real_cluster.admin_kubeconfig.read_text())
    server = urllib.parse.urlsplit(config["clusters"][0]["cluster"]["server"])
    gateway_svc = _json(real_cluster, "service", "-n", release.namespace, "anchorage-gateway")
    ports = {p["name"]: p["port"] for p in gateway_svc["spec"]["ports"]}
    gateway_pod = _json(real_cluster, "pods", "-n", release.namespace, "-l",
                        "app.kubernetes.io/name=anchorage-gateway")["items"][0]
    admin_port = next(p["containerPort"] for c in gateway_pod["spec"]["containers"] for p in c.get("ports") or []
                      if p["name"] == "admin")
    store_svc = _json(real_cluster, "service", "-n", "anchorage-store", "s3")
    store_pod = _json(real_cluster, "pods", "-n", "anchorage-store")["items"][0]
    node = _json(real_cluster, "node", REAL_NODES[0])
    node_ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    args = next(c for c in _json(real_cluster, "deployment", "-n", release.namespace, "anchorage-operator")["spec"][
        "template"]["spec"]["containers"])["args"]
    gateway_url = urllib.parse.urlsplit(next(a for a in args if a.startswith("--gateway-url="))
                                        .removeprefix("--gateway-url="))
    return {"bridge": server.hostname, "apiserver_port": server.port, "gateway_host": gateway_url.hostname,
            "gateway_port": gateway_url.port, "gateway_ip": gateway_svc["spec"]["clusterIP"],
            "gateway_admin_port": ports["admin"], "gateway_pod": gateway_pod["status"]["podIP"],
            "gateway_pod_admin_port": admin_port, "store_ip": store_svc["spec"]["clusterIP"],
            "store_port": store_svc["spec"]["ports"][0]["port"], "store_pod": store_pod["status"]["podIP"],
            "node_ip": node_ip}


def _targets(places: dict[str, Any], host_port: int, other_pod: str) -> list[dict[str, Any]]:
    p = places

    def t(name: str, host: str, port: int, kind: str = "tcp") -> dict[str, Any]:
        return {"name": name, "host": host, "port": port, "kind": kind}

    return [t("etcd (bridge)", p["bridge"], 2379), t("etcd (pod loopback)", "127.0.0.1", 2379),
            t("apiserver (bridge)", p["bridge"], p["apiserver_port"]), t("apiserver (service)", "10.96.0.1", 443),
            t("gateway admin port (pod)", p["gateway_pod"], p["gateway_pod_admin_port"]),
            t("gateway admin port (service)", p["gateway_ip"], p["gateway_admin_port"]),
            t("another trial's pod", other_pod, 8000), t("kubelet", p["node_ip"], 10250),
            t("listener on this machine", p["bridge"], host_port), t("coredns", "10.96.0.10", 53, "dns"),
            t("cluster name resolves", "kubernetes.default.svc.cluster.local", 443, "resolve"),
            t("store (service)", p["store_ip"], p["store_port"]), t("store (pod)", p["store_pod"], p["store_port"]),
            t("gateway model port (by name)", p["gateway_host"], p["gateway_port"]),
            t("gateway name resolves", p["gateway_host"], p["gateway_port"], "resolve")]


def _namespace(real: RealCluster, name: str) -> str:
    real.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=true")
    return real.namespace(name)


@pytest.mark.slow  # (a probe trial and four probe pods on real nodes: about a minute)
def test_an_agent_reaches_the_gateways_model_port_and_nothing_else(real_cluster: RealCluster,
                                                                    places: dict[str, Any]) -> None:
    from anchorage.runtime.kube.jobs import OperatorConfig, network_policies

    real = real_cluster
    release = real.release
    listener = "podlife-listener"
    _trial(real, listener, {"kind": "command", "command": ["python3", "-c", LISTEN]},
           limits={"agentTimeoutSec": 300, "cpus": 0.2, "memoryMB": 256})
    real.wait_for(lambda: any((p["status"].get("podIP") and p["status"].get("phase") == "Running")
                              for p in _trial_pods(real, listener)), 180, "the listener trial's pod to run")
    other = next(p for p in _trial_pods(real, listener) if p["status"].get("podIP"))["status"]["podIP"]
    with _host_listener(places["bridge"]) as host_port:
        targets = _targets(places, host_port, other)
        name = "podlife-probe"
        _trial(real, name, {"kind": "command", "command": ["python3", "-c", PROBE, json.dumps(targets),
                                                            "/root/results/probe.json"]},
               limits={"agentTimeoutSec": 120, "cpus": 0.5, "memoryMB": 512})
        # the same probe without the policies; as a verifier; under the chart's default policies
        open_ns = _namespace(real, "podlife-open")
        _probe_pod(real, open_ns, "probe", targets, {"app": "probe"}, policed=False)
        _probe_pod(real, release.trials_namespace, "podlife-verifier-probe", targets,
                   {"app.kubernetes.io/managed-by": "anchorage", "anchorage.dev/role": "verifier",
                    "anchorage.dev/store-access": "true"})
        defaults_ns = _namespace(real, "podlife-defaults")
        chart_values = yaml.safe_load((REPO / "charts" / "anchorage" / "values.yaml").read_text())
        config = OperatorConfig(gateway_namespace=release.namespace, gateway_selector={
            "app.kubernetes.io/name": "anchorage-gateway", "app.kubernetes.io/instance": release.name},
            store_egress=chart_values["trials"]["networkPolicies"]["storeEgress"])
        for policy in network_policies(defaults_ns, config):
            _apply(real, policy)
        agent_phase = {"dnsPolicy": "None", "dnsConfig": {"nameservers": ["127.0.0.1"]},
                       "hostAliases": [{"ip": places["gateway_ip"], "hostnames": [places["gateway_host"]]}]}
        _probe_pod(real, defaults_ns, "agent", targets, {"app.kubernetes.io/managed-by": "anchorage",
                                                         "anchorage.dev/role": "trial"}, **agent_phase)
        _probe_pod(real, defaults_ns, "after-agent", targets, {
            "app.kubernetes.io/managed-by": "anchorage", "anchorage.dev/role": "trial",
            "anchorage.dev/store-access": "true"})
        status = _wait_phase(real, "trial", release.namespace, name, 300)
        unpoliced = _probe_result(real, open_ns, "probe")
        verifier = _probe_result(real, release.trials_namespace, "podlife-verifier-probe")
        chart_agent = _probe_result(real, defaults_ns, "agent")
        chart_after = _probe_result(real, defaults_ns, "after-agent")
    # the trial's own probe, uploaded after its agent ended (the results reached the store: the upload works)
    folder = real.store / "_trials" / release.namespace / name
    trial_probe = json.loads((folder / "artifacts" / "probe.json").read_text())
    assert _open(trial_probe) == GATEWAY, json.dumps(trial_probe, indent=1)
    assert status["phase"] == "Failed" and status["reason"] == "no_artifact", status  # probe.json is no task artifact
    (pod,) = _trial_pods(real, name)
    assert pod["metadata"]["labels"].get("anchorage.dev/store-access") == "true"  # the operator opened the store
    assert pod["spec"]["dnsPolicy"] == "None" and pod["spec"]["hostAliases"][0]["hostnames"] == [places["gateway_host"]]
    # without the policies the probe reaches what they blocked: kube-router, nothing else, blocks it
    blocked = set(trial_probe) - GATEWAY - CLOSED_BY_DESIGN
    assert blocked <= _open(unpoliced), json.dumps(unpoliced, indent=1)
    assert not _open(unpoliced) & CLOSED_BY_DESIGN, json.dumps(unpoliced, indent=1)
    # a verifier reaches DNS and the store only (its names resolve; the gateway's too, through the cluster DNS)
    assert _open(verifier) == {"coredns", "cluster name resolves", "store (service)", "store (pod)",
                               "gateway name resolves"}, json.dumps(verifier, indent=1)
    # the chart's default values: the agent reaches the gateway only; after it, DNS, but no private store
    assert _open(chart_agent) == GATEWAY, json.dumps(chart_agent, indent=1)
    assert _open(chart_after) == {"coredns", "cluster name resolves", *GATEWAY}, json.dumps(chart_after, indent=1)
    for namespace in (open_ns, defaults_ns):
        real.kubectl("delete", "namespace", namespace, "--wait=false")
    real.kubectl("delete", "pod", "-n", release.trials_namespace, "podlife-verifier-probe", "--wait=false")
    real.kubectl("delete", "trial", "-n", release.namespace, listener, name, "--wait=false")
    real.kubectl("delete", "job", "-n", release.trials_namespace, f"{listener}-a0", "--wait=false", check=False)


def _record(real: RealCluster, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((real.store / "_trials" / real.release.namespace / name / "trial.json")
                                      .read_text())
    return data


@pytest.mark.slow  # (four trials kept from running, each retried once after the session's 45 s bounds: ~2 minutes)
def test_platform_failures_are_the_platforms_retried_once_and_never_a_score(real_cluster: RealCluster) -> None:
    real = real_cluster
    release = real.release
    registry = real.images["agent-base"].split("/")[0]
    # a ResourceQuota only a GPU trial meets (other trials request no GPU): its pod is refused
    _apply(real, {"apiVersion": "v1", "kind": "ResourceQuota",
                  "metadata": {"name": "podlife-no-gpus", "namespace": release.trials_namespace},
                  "spec": {"hard": {"requests.nvidia.com/gpu": "0"}}})
    cases = {
        "podlife-runtime": ({"kind": "oracle"}, {"runtimeClassName": "no-such-runtime"}, "pod_rejected",
                            'RuntimeClass "no-such-runtime"'),
        "podlife-image": ({"kind": "command", "command": ["true"], "image": f"{registry}/anchorage/agent-base:no-such-tag"},
                          {}, "image_pull", "no-such-tag"),
        "podlife-unschedulable": ({"kind": "oracle"}, {"limits": {"cpus": 64}}, "unschedulable", "Insufficient cpu"),
        "podlife-quota": ({"kind": "oracle"}, {"limits": {"gpus": 1}}, "quota_exceeded", "exceeded quota"),
    }
    try:
        for name, (agent, spec, _, _) in cases.items():
            _trial(real, name, agent, retries=1, **spec)
        for name, (_, _, reason, evidence) in cases.items():
            status = _wait_phase(real, "trial", release.namespace, name, 420)
            assert status["phase"] == "InfrastructureFailed" and status["reason"] == reason, (name, status)
            assert evidence in status["message"], (name, status["message"])
            assert status.get("oEval") is None and not status.get("scoringRun"), status  # never scored
            record = _record(real, name)
            assert record["attempt"] == 2 and [a["reason"] for a in record["previous_attempts"]] == [reason], record
            assert record.get("score") is None
            found = real.kubectl("get", "scoringrun", f"{name}-score", "-n", release.namespace, check=False)
            assert found.returncode != 0, "an infrastructure failure is never scored"
    finally:
        real.kubectl("delete", "resourcequota", "-n", release.trials_namespace, "podlife-no-gpus", check=False)
        real.kubectl("delete", "trial", "-n", release.namespace, *cases, "--wait=false", check=False)
        _remove_pods(real, trials=tuple(cases))


@pytest.mark.slow  # (a campaign of two trials, one of them retried: about a minute)
def test_a_campaigns_leaderboard_counts_a_platform_failure_as_one_not_as_a_zero(real_cluster: RealCluster) -> None:
    real = real_cluster
    release = real.release
    registry = real.images["agent-base"].split("/")[0]
    name = "podlife-board"
    _apply(real, {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
                  "metadata": {"name": name, "namespace": release.namespace},
                  "spec": {"tasks": ["smoke-inventory"], "seeds": 1, "parallelism": 2,
                           "retries": {"infrastructure": 1},
                           "entries": [{"name": "oracle", "agent": {"kind": "oracle"}},
                                       {"name": "unpullable", "agent": {
                                           "kind": "command", "command": ["true"],
                                           "image": f"{registry}/anchorage/agent-base:no-such-tag"}}]}})
    try:
        status = _wait_phase(real, "verificationcampaign", release.namespace, name, 420)
        rows = {row["entry"]: row for row in status["leaderboard"]}
        assert rows["oracle"]["oEval"] == 1.0, status
        assert rows["unpullable"].get("oEval") is None and rows["unpullable"]["infrastructureFailed"] == 1, status
        assert status["infrastructureFailed"] == 1 and status["scored"] == 1, status
    finally:
        real.kubectl("delete", "verificationcampaign", "-n", release.namespace, name, "--wait=false", check=False)
        _remove_pods(real, campaign=name)


@pytest.mark.slow  # (a trial held unschedulable for 18 s, then its 15 s agent: about a minute)
def test_time_before_the_agents_container_starts_is_not_the_agents(real_cluster: RealCluster) -> None:
    """Every node refuses new pods for longer than the agent's whole timeout (as a slow image pull or a busy
    cluster would keep it waiting); the agent then still gets its full time, and its trial succeeds."""
    from anchorage.controller.podevidence import condition

    real = real_cluster
    release = real.release
    name = "podlife-late"
    taint = "podlife.test/hold=true:NoSchedule"
    real.kubectl("taint", "node", *REAL_NODES, taint)
    try:
        _trial(real, name, {"kind": "command", "command": ["python3", "-c", "import time; time.sleep(8)"]},
               limits={"agentTimeoutSec": 15, "cpus": 0.5, "memoryMB": 256})
        real.wait_for(lambda: any((condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable"
                                  for p in _trial_pods(real, name)), 60, "the trial's pod to wait for a node")
        time.sleep(18)  # longer than the agent's whole timeout (15 s)
    finally:
        real.kubectl("taint", "node", *REAL_NODES, taint.removesuffix(":NoSchedule").replace("=true", "") + "-",
                     check=False)
    status = _wait_phase(real, "trial", release.namespace, name, 240)
    # the agent ran its 8 s within its 15 s: not the model's timeout (it exited 0; the artifact check decides the rest)
    assert status["reason"] != "timeout" and status["phase"] != "InfrastructureFailed", status
    (pod,) = _trial_pods(real, name)
    agent = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "agent")["state"]["terminated"]
    assert agent["exitCode"] == 0
    created = pod["metadata"]["creationTimestamp"]
    assert agent["startedAt"] > created and _seconds(agent["startedAt"]) - _seconds(created) >= 15
    real.kubectl("delete", "trial", "-n", release.namespace, name, "--wait=false")


def _seconds(stamp: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_a_deleted_or_edited_policy_comes_back(real_cluster: RealCluster) -> None:
    from anchorage.controller.policies import same

    real = real_cluster
    namespace = real.release.trials_namespace
    built = {p["metadata"]["name"]: p for p in _json(real, "networkpolicies", "-n", namespace)["items"]}
    assert {"anchorage-default-deny", "anchorage-gateway-egress", "anchorage-store-egress"} <= set(built)
    real.kubectl("delete", "networkpolicy", "-n", namespace, "anchorage-default-deny")
    real.kubectl("patch", "networkpolicy", "-n", namespace, "anchorage-gateway-egress", "--type=merge",
                 "-p", json.dumps({"spec": {"egress": [{}]}}))  # "allow all"

    def restored() -> bool:
        now = {p["metadata"]["name"]: p for p in _json(real, "networkpolicies", "-n", namespace)["items"]}
        return all(name in now and same(now[name]["spec"], built[name]["spec"]) for name in built)

    real.wait_for(restored, 30, "the operator to restore its policies")
