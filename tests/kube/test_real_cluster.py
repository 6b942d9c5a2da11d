"""The CRDs and a trial against Kubernetes: the real control plane (``[real]``) and the cluster fake (``[fake]``).

Every test runs twice: ``[real]`` against the session's real cluster (``tests/kube_cluster.py``: the
pinned kube-apiserver, etcd, controller manager and scheduler that ``make kube`` builds, real nodes, the chart
installed from the cluster's registry) and ``[fake]`` against the cluster fake, started empty like a new cluster, so the fake
is held to what the real server does. The checks: ``crds/`` applies after a server-side dry run and
becomes Established; ``kubectl explain`` shows the fields' descriptions; the printer columns; invalid
manifests get the API's schema and CEL errors (server-side dry run, nothing is stored); and
``examples/trial.yaml`` runs to O-Eval 1.0 through an operator — on the real cluster the chart's operator pod
(its ServiceAccount: the chart's RBAC, not the admin's), its pods on the real nodes in the chart's trials namespace
(PodSecurity ``restricted``), and its Events in ``kubectl describe``; on the fake an ``anchorage operator`` the
test starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from anchorage_devcluster.serving import ClusterThread
from kube_cluster import OPERATOR_NAMESPACE, RealCluster, kubectl_env

REPO = Path(__file__).resolve().parents[2]
API = "anchorage.dev/v1alpha1"


@dataclass
class Target:
    """A cluster to test against: how to reach it and what the trial test may use there."""

    name: str
    env: dict[str, str]
    namespace: str
    root: Path
    real: RealCluster | None = None
    store: str | None = None
    operator_flags: list[str] = field(default_factory=list)
    applied: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def kubectl(self, *args: str, stdin: Any = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        text = yaml.safe_dump(stdin) if isinstance(stdin, dict) else stdin
        result = subprocess.run(["kubectl", *args], env=self.env, input=text, capture_output=True, text=True,
                                timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed on the {self.name} cluster: {result.stderr}")
        return result


def _real(root: Path, real: RealCluster) -> Iterator[Target]:
    namespace = real.namespace("anchorage-e2e")
    yield Target("real", real.env(), namespace, root, real=real)


def _fake(root: Path) -> Iterator[Target]:
    store = root / "runs"
    store.mkdir()
    namespace = "anchorage-e2e"
    with ClusterThread(root / "kubeconfig", writable=(store,), namespaces=(namespace,), authenticate=True) as cluster:
        yield Target("fake", kubectl_env({**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "HOME": str(root),
                                          "ANCHORAGE_CAMPAIGN_INTERVAL": "0.5"}), namespace, root,
                     store=f"file://{store}", operator_flags=[f"--task-source={REPO / 'tasks'}",
                                                               "--no-require-enforcement"])  # (no engine)


@pytest.fixture(scope="module", params=["fake", pytest.param("real", marks=pytest.mark.cluster)])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp(request.param)
    variant = _fake(root) if request.param == "fake" else _real(root, request.getfixturevalue("real_cluster"))
    for cluster in variant:
        # crds/ after a server-side dry run (what an admin would do first), then for real; both kept for the test
        cluster.applied["dry-run"] = cluster.kubectl("apply", "--dry-run=server", "-f", str(REPO / "crds"))
        cluster.applied["apply"] = cluster.kubectl("apply", "-f", str(REPO / "crds"))
        cluster.applied["wait"] = cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                                                  "-f", str(REPO / "crds"))
        yield cluster


def _retry(fn: Callable[[], subprocess.CompletedProcess[str]], ok: Callable[[str], bool],
           timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``fn`` until ``ok(stdout)`` (a real API server publishes a new CRD's OpenAPI after a moment)."""
    deadline = time.monotonic() + timeout
    result = fn()
    while not ok(result.stdout) and time.monotonic() < deadline:
        time.sleep(1)
        result = fn()
    return result


def test_crds_apply_after_a_server_side_dry_run_and_become_established(target: Target) -> None:
    dry, applied, wait = target.applied["dry-run"], target.applied["apply"], target.applied["wait"]
    assert dry.returncode == 0 and "(server dry run)" in dry.stdout, dry.stderr
    assert applied.returncode == 0, applied.stderr
    for plural in ("trials", "verificationcampaigns", "scoringruns"):
        assert f"customresourcedefinition.apiextensions.k8s.io/{plural}.anchorage.dev" in applied.stdout
        assert f"{plural}.anchorage.dev condition met" in wait.stdout, wait.stderr


@pytest.mark.parametrize(("path", "fragment"), [
    ("trials.spec.seed", "Seed index (0-based)."),
    ("trials.spec.agent.kind", "claude-code | codex | command | mock | opencode | oracle | replay"),
    ("verificationcampaigns.spec.parallelism", "Max trials running at once."),
    ("scoringruns.spec.campaignRef", "Name of a campaign whose artifacts are rescored."),
], ids=["trial-seed", "agent-kind", "campaign-parallelism", "scoringrun-campaignref"])
def test_kubectl_explain_shows_the_field_descriptions(target: Target, path: str, fragment: str) -> None:
    result = _retry(lambda: target.kubectl("explain", path), lambda out: fragment in out)
    assert fragment in result.stdout, result.stderr or result.stdout


def test_printer_columns_and_names(target: Target) -> None:
    crds = {d["metadata"]["name"]: d for d in json.loads(target.kubectl(
        "get", "crd", "-o", "json", check=True).stdout)["items"]}
    trial = crds["trials.anchorage.dev"]["spec"]
    assert [c["name"] for c in trial["versions"][0]["additionalPrinterColumns"] if not c.get("priority")] == [
        "Phase", "Task", "Entry", "Seed", "O-Eval", "Cost", "Age"]
    assert trial["names"]["shortNames"] == ["tr"] and trial["names"]["categories"] == ["anchorage"]
    campaign = crds["verificationcampaigns.anchorage.dev"]["spec"]["versions"][0]
    assert {"Phase", "Progress", "Best", "Cost"} <= {c["name"] for c in campaign["additionalPrinterColumns"]}
    # kubectl resolves a category from its discovery cache: refreshed first (a cache written before the CRDs were
    # served lacks them)
    target.kubectl("api-resources", "--cached=false", "-o", "name", check=True)
    listing = target.kubectl("get", "anchorage", "-n", target.namespace)  # the category resolves to our kinds
    assert listing.returncode == 0, listing.stderr


def _campaign(**spec: Any) -> dict[str, Any]:
    return {"kind": "VerificationCampaign", "spec": {"tasks": ["smoke-inventory"],
                                                     "entries": [{"name": "o", "agent": {"kind": "oracle"}}], **spec}}


def _trial(**spec: Any) -> dict[str, Any]:
    return {"kind": "Trial", "spec": {"task": "smoke-inventory", "agent": {"kind": "oracle"}, **spec}}


@pytest.mark.parametrize(("doc", "fragments"), [
    (_trial(seed=-1), ["spec.seed", "should be greater than or equal to 0"]),
    (_trial(agent={"kind": "shell"}), ["spec.agent.kind", 'Unsupported value: "shell"']),
    (_campaign(parallelism=5000), ["spec.parallelism", "should be less than or equal to 1000"]),
    (_campaign(parallelism=0), ["spec.parallelism", "should be greater than or equal to 1"]),
    (_trial(agent={"kind": "command"}), ["spec.agent", "agent.kind 'command' needs agent.command"]),
    (_campaign(baseline="flash"), ["baseline must be the name of one of the entries"]),
    ({"kind": "ScoringRun", "spec": {"trialRef": "a", "campaignRef": "b"}}, ["needs exactly one of"]),
], ids=["bad-seed", "unknown-agent-kind", "parallelism-too-high", "parallelism-zero", "cel-command-agent",
        "cel-baseline", "cel-two-sources"])
def test_invalid_manifests_get_the_apis_errors(target: Target, doc: dict[str, Any], fragments: list[str]) -> None:
    manifest = {"apiVersion": API, "metadata": {"name": "bad", "namespace": target.namespace}, **doc}
    result = target.kubectl("apply", "--dry-run=server", "-f", "-", stdin=manifest)
    assert result.returncode != 0 and "is invalid" in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    valid = target.kubectl("apply", "--dry-run=server", "-f", "-", stdin={
        **manifest, **(_campaign() if doc["kind"] == "VerificationCampaign" else
                       _trial() if doc["kind"] == "Trial" else {"spec": {"trialRef": "a"}})})
    assert valid.returncode == 0, valid.stderr  # the same manifest, fixed, passes
    assert target.kubectl("get", doc["kind"].lower(), "bad", "-n", target.namespace).returncode != 0  # dry run


def _table(text: str) -> list[dict[str, str]]:
    header, *lines = text.splitlines()
    names = header.split()
    starts = [header.index(n) for n in names]
    return [{n: line[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)}
            for line in lines]


def _operator(target: Target) -> tuple[subprocess.Popen[bytes] | None, Callable[[], str], str]:
    """Start the operator for the trial test: (process or None when the real cluster's helper runs it, its log,
    the namespace the Trial goes to)."""
    if target.real is not None:  # the chart's operator pod
        real = target.real
        return None, real.operator_logs, OPERATOR_NAMESPACE
    log = target.root / "operator.log"
    with log.open("wb") as handle:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "anchorage"), "operator", "-n", target.namespace, "--trials-namespace",
             target.namespace, "--store", target.store or "", "--standalone", "--log-format", "plain",
             *target.operator_flags], env=target.env, stdout=handle, stderr=subprocess.STDOUT)
    return proc, lambda: log.read_text()[-3000:], target.namespace


@pytest.mark.slow  # an operator, a trial and its verifier on the real nodes (the fake's variant: seconds)
def test_example_trial_runs_to_a_score_through_an_operator(target: Target) -> None:
    proc, tail, namespace = _operator(target)
    name = yaml.safe_load((REPO / "examples" / "trial.yaml").read_text())["metadata"]["name"]
    try:
        target.kubectl("apply", "-n", namespace, "-f", str(REPO / "examples" / "trial.yaml"), check=True)
        scored = _retry(lambda: target.kubectl("get", "tr", name, "-n", namespace, "-o",
                                               "jsonpath={.status.oEval}"), lambda out: out != "", timeout=300)
        assert scored.stdout, tail()
        rows = [r for r in _table(target.kubectl("get", "tr", "-n", namespace, check=True).stdout)
                if r["NAME"] == name]
        assert rows and rows[0]["PHASE"] == "Succeeded" and float(rows[0]["O-EVAL"]) == 1.0, rows
        assert rows[0]["TASK"] == "smoke-inventory" and rows[0]["SEED"] == "0"
        if target.real is not None:  # the operator's Events, as kubectl describe shows them
            described = target.kubectl("describe", "tr", name, "-n", namespace, check=True).stdout
            events = described[described.index("Events:"):]
            for reason in ("Started", "Succeeded"):
                assert reason in events and "anchorage-operator" in events, described
    finally:
        target.kubectl("delete", "tr", name, "-n", namespace, "--wait=false")
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
