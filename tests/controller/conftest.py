"""A running cluster fake (with its kubelet) plus the operator as a subprocess, and kubectl helpers."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from anchorage_devcluster.serving import Cluster, ClusterThread
from anchorage_devcluster.storage import Event, Resource
from kube_cluster import kubectl_env
from simulated_pods import anchorage_pod

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Env:
    """The fake, its thread, the store folder, and the operator process (restartable)."""

    cluster: Cluster
    thread: ClusterThread
    store: Path
    root: Path
    env: dict[str, str]
    operator: subprocess.Popen[bytes] | None = None
    starts: int = 0
    logs: list[Path] = field(default_factory=list)
    _files: list[Any] = field(default_factory=list)

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(["kubectl", *args], env=self.env, capture_output=True, text=True, timeout=60,
                                input=stdin)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def get(self, plural: str, name: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl("get", plural, name, "-o", "json").stdout)
        return out

    def start_operator(self, *extra: str) -> None:
        log = self.root / f"operator-{self.starts}.log"
        self.logs.append(log)
        self.starts += 1
        handle = log.open("wb")
        self._files.append(handle)
        self.operator = subprocess.Popen(
            [str(Path(sys.executable).parent / "anchorage"), "operator", "--store", f"file://{self.store}",
             "--task-source", str(REPO / "tasks"), "--log-format", "plain", "--standalone",
             "--no-require-enforcement", *extra],  # the fake enforces no NetworkPolicy
            env=self.env, stdout=handle, stderr=subprocess.STDOUT)

    def stop_operator(self, kill: bool = False) -> None:
        if self.operator is not None:
            (self.operator.kill if kill else self.operator.terminate)()
            self.operator.wait(30)
            self.operator = None
        for handle in self._files:
            handle.close()
        self._files.clear()

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.5)
        tail = "\n".join(p.read_text()[-3000:] for p in self.logs[-1:])
        raise AssertionError(f"timed out waiting for {what}; the objects:\n{self.describe()}\noperator log tail:\n{tail}")

    def describe(self) -> str:
        """A line per Trial, campaign, ScoringRun, Job and pod in the fake: its phase and what its status says (a
        timed-out wait names where the work stood; the operator's log tail is mostly its timers)."""
        lines = []
        for group, plural in (("anchorage.dev", "verificationcampaigns"), ("anchorage.dev", "trials"),
                              ("anchorage.dev", "scoringruns"), ("batch", "jobs"), ("", "pods")):
            for obj in self.objects(group, plural):
                status = obj.get("status") or {}
                said = {k: status[k] for k in ("phase", "reason", "message", "progress", "active", "succeeded",
                                                "failed") if status.get(k) not in (None, "")}
                containers = [(c.get("name"), c.get("state")) for c in status.get("containerStatuses") or []]
                deleting = " deleting" if obj["metadata"].get("deletionTimestamp") else ""
                lines.append(f"  {plural}/{obj['metadata']['name']}{deleting}: {said} {containers or ''}"[:600])
        return "\n".join(lines) or "  (none)"

    def objects(self, group: str, plural: str) -> list[dict[str, Any]]:
        res = self.cluster.api.store.resource(group, plural)
        return self.thread.call(lambda: [dict(o) for o in res.objects.values()])


def _requirements() -> None:
    if shutil.which("kubectl", path=kubectl_env(dict(os.environ))["PATH"]) is None:
        pytest.skip("kubectl is not on PATH nor built (`make kube`): the end-to-end tests drive the fake with it")
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: the fake kubelet runs pods with it (apt install bubblewrap)")


@contextlib.contextmanager
def cluster_env(tmp_path: Path, *, simulate: Callable[[dict[str, Any]], dict[str, int]] | None,
                interval: str) -> Iterator[Env]:
    """The fake (with ``simulate``: the kubelet's hook standing in for running pods) and an Env for it."""
    store = tmp_path / "runs"
    store.mkdir()
    thread = ClusterThread(tmp_path / "kubeconfig", crds_dir=REPO / "crds", writable=(store,),
                           simulate=simulate, authenticate=True)
    cluster = thread.__enter__()
    env = kubectl_env({**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "ANCHORAGE_CAMPAIGN_INTERVAL": interval,
                       "ANCHORAGE_WATCH_TIMEOUT": "20", "HOME": str(tmp_path)})
    state = Env(cluster, thread, store, tmp_path, env)
    try:
        yield state
    finally:
        state.stop_operator(kill=True)
        thread.__exit__(None, None, None)


@pytest.fixture
def kube_env(tmp_path: Path) -> Iterator[Env]:
    """The fake with a kubelet that runs pods under bubblewrap."""
    _requirements()
    with cluster_env(tmp_path, simulate=None, interval="0.5") as env:
        yield env


@pytest.fixture
def sim_env(tmp_path: Path) -> Iterator[Env]:
    """The fake with simulated pods (nothing runs; the store gets what the pod programs would write)."""
    if shutil.which("kubectl", path=kubectl_env(dict(os.environ))["PATH"]) is None:
        pytest.skip("kubectl is not on PATH nor built (`make kube`): the tests drive the fake with it")
    with cluster_env(tmp_path, simulate=anchorage_pod, interval="0.3") as env:
        yield env


def count_added(env: Env) -> collections.Counter[tuple[str, str]]:
    """A counter of ADDED events per (plural, name) in the fake's storage, from now on."""
    added: collections.Counter[tuple[str, str]] = collections.Counter()

    def count(res: Resource, event: Event) -> None:
        if event.type == "ADDED":
            added[(res.plural, event.obj["metadata"]["name"])] += 1

    env.thread.call(lambda: env.cluster.api.store.on_change.append(count))
    return added


def chat_status(base_url: str, token: str, model: str = "mock-model") -> int:
    """The HTTP status of one chat completion at a gateway with ``token`` (401: the token is refused)."""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = urllib.request.Request(f"{base_url}/v1/chat/completions", data=body, headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code
