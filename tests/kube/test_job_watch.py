"""The operator's own watch of its Jobs (``anchorage.controller.watching``), against the real control plane.

* a watch lists, then watches; stopped and started again from the last version it saw it resumes (no listing,
  the changes made meanwhile arrive);
* resuming from a version the server no longer has (410 Gone) lists again, and that listing is a *re*-listing;
* a watch the server ends (its timeout) and a connection that drops (a TCP relay cut in the middle) are
  resumed from the last version, not listed again;
* it authenticates as the operator does (the chart's ServiceAccount token, RBAC-checked);
* only ended Jobs with a known role and the operator's label reach the handlers, never the first listing;
* a re-listed ended Job is handed on only when its trial is known to wait for it; a peering pause drops events.

The operator's kill -9 tests (``test_real_operator.py``: 10 kills during a 150-trial campaign;
``tests/controller/test_crash_safety.py`` on the fake) run through this watch too: nothing created twice,
nothing lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import subprocess
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import pytest
from tests.controller.watch_task import running as _running

from anchorage.controller import caches, jobends, kube, watching
from anchorage.runtime.kube import jobs
from anchorage_devcluster.serving import ClusterThread
from kube_cluster import RealCluster, kubectl_env

Obj = dict[str, Any]


def _client(real: RealCluster, kubeconfig: str | None = None, host: str | None = None) -> kube.Client:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=kubeconfig or str(real.admin_kubeconfig),
                                       client_configuration=configuration)
    if host is not None:
        configuration.host = host
    return kube.Client(configuration)


def _client_at(kubeconfig: Path) -> kube.Client:
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return kube.Client(configuration)


def _apply_configmap(root: Path, name: str) -> None:
    env = kubectl_env({**os.environ, "KUBECONFIG": str(root / "kubeconfig"), "HOME": str(root)})
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns",
                                                                 "labels": {"watch-test": "yes"}}}
    subprocess.run(["kubectl", "apply", "-f", "-"], env=env, check=True, capture_output=True, timeout=60,
                   input=json.dumps(doc).encode())


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def __call__(self, type_: str, obj: Obj) -> None:
        self.events.append((type_, obj["metadata"]["name"]))

    def types(self, name: str) -> list[str]:
        return [t for t, n in self.events if n == name]


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def _session(client: kube.Client) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client.ssl_context() or False)) as session:
        yield session
    await asyncio.sleep(0.3)  # TLS connections finish closing (aiohttp closes them in the background)
    gc.collect()


def _configmap(real: RealCluster, ns: str, name: str, labelled: bool = True, data: str = "1") -> None:
    labels = {"watch-test": "yes"} if labelled else {}
    real.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": name, "namespace": ns, "labels": labels}, "data": {"v": data}}))


@pytest.mark.cluster
async def test_a_watch_lists_then_resumes_from_its_last_version_and_relists_after_410(real_cluster: RealCluster) -> None:
    real = real_cluster
    ns = real.namespace(f"watch-{uuid.uuid4().hex[:6]}", pod_security=None)
    for name in ("a", "a2", "a3"):
        _configmap(real, ns, name)
    _configmap(real, ns, "unlabelled", labelled=False)
    client = _client(real)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    async with _session(client) as session:
        first = Recorder()
        watch = watching.Watch(client, session, path, "watch-test", first)
        watch.page = 2  # listed in pages: all three come
        async with _running(watch):
            await _until(lambda: all("LISTED" in first.types(n) for n in ("a", "a2", "a3")), "the listing")
            assert watch.listings == 1
            _configmap(real, ns, "b")
            await _until(lambda: "ADDED" in first.types("b"), "b's creation")
        assert not first.types("unlabelled"), "the label selector is the server's"
        version = watch.resource_version

        _configmap(real, ns, "b", data="2")  # while nobody watches
        _configmap(real, ns, "d")
        resumed = Recorder()
        again = watching.Watch(client, session, path, "watch-test", resumed, resource_version=version)
        async with _running(again):
            await _until(lambda: "MODIFIED" in resumed.types("b") and "ADDED" in resumed.types("d"), "the changes")
        assert not [t for t, _ in resumed.events if t in (watching.LISTED, watching.RELISTED)], resumed.events
        assert again.listings == 1



async def test_a_watch_resuming_from_a_version_the_server_no_longer_has_lists_again(tmp_path: Path) -> None:
    """410 Gone (the fake compacts its event log as etcd does; the real server answers an expired version alike)."""
    thread = ClusterThread(tmp_path / "kubeconfig", namespaces=("ns",), authenticate=True)
    with thread as cluster:
        for name in ("a", "b"):
            _apply_configmap(tmp_path, name)
        client = _client_at(tmp_path / "kubeconfig")
        async with _session(client) as session:
            first = Recorder()
            watch = watching.Watch(client, session, "/api/v1/namespaces/ns/configmaps", "watch-test", first)
            async with _running(watch):
                await _until(lambda: len(first.types("b")) == 1, "the listing")
            version = watch.resource_version
            _apply_configmap(tmp_path, "c")
            thread.call(lambda: cluster.api.expire("configmaps", group=""))
            stale = Recorder()
            again = watching.Watch(client, session, "/api/v1/namespaces/ns/configmaps", "watch-test", stale,
                                   resource_version=version)
            async with _running(again):
                await _until(lambda: {n for t, n in stale.events if t == watching.RELISTED} == {"a", "b", "c"},
                             f"the re-listing: {stale.events}")
            assert again.listings == 2


@pytest.mark.cluster
async def test_a_watch_the_server_ends_or_whose_connection_drops_is_resumed_not_relisted(
        real_cluster: RealCluster) -> None:
    real = real_cluster
    ns = real.namespace(f"watch-{uuid.uuid4().hex[:6]}", pod_security=None)
    _configmap(real, ns, "a")
    upstream = urllib.parse.urlsplit(_client(real).host)
    connections: list[asyncio.StreamWriter] = []
    every: list[asyncio.StreamWriter] = []

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(upstream.hostname, upstream.port)
        connections.extend((writer, up_writer))
        every.extend((writer, up_writer))

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = _client(real, host=f"https://127.0.0.1:{port}")
    async with _session(client) as session:
        events = Recorder()
        watch = watching.Watch(client, session, f"/api/v1/namespaces/{ns}/configmaps", "watch-test", events, timeout=1)
        async with _running(watch):
            await _until(lambda: "LISTED" in events.types("a"), "the listing")
            await asyncio.sleep(2.5)  # the server ends the watch after 1 s, twice
            _configmap(real, ns, "b")
            await _until(lambda: "ADDED" in events.types("b"), "b after the server ended the watch")
            watch.timeout = 300
            await asyncio.sleep(1.5)  # a long watch is open now
            server.close()
            for writer in connections:  # the connection drops in the middle of the watch
                writer.transport.abort()
            connections.clear()
            await server.wait_closed()
            _configmap(real, ns, "c")
            await asyncio.sleep(1)
            server = await asyncio.start_server(relay, "127.0.0.1", port)
            await _until(lambda: "ADDED" in events.types("c"), "c after the reconnection")
        assert watch.listings == 1, "resumed from its version, not listed again"
        assert [t for t, _ in events.events].count(watching.LISTED) == 1
    server.close()
    for writer in every:
        writer.transport.abort()
    await server.wait_closed()
    await asyncio.sleep(0.1)


@pytest.mark.cluster
async def test_the_watch_authenticates_as_the_operators_service_account(real_cluster: RealCluster) -> None:
    release = real_cluster.release
    client = _client(real_cluster, kubeconfig=str(release.operator_kubeconfig))
    assert client.authorization(), "the chart's ServiceAccount token"
    async with _session(client) as session:
        events = Recorder()
        watch = watching.Watch(client, session, watching.job_paths([release.trials_namespace])[0],
                               watching.JOBS_SELECTOR, events)
        async with _running(watch):
            await _until(lambda: bool(watch.resource_version), "the listing")
            await asyncio.sleep(1)
        assert watch.listings == 1
        denied = watching.Watch(client, session, "/apis/batch/v1/namespaces/kube-system/jobs", "", events)
        with pytest.raises(kube.ApiError) as error:
            await denied._list()
        assert error.value.status == 403


def _job(ns: str, name: str, labels: dict[str, str]) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}}}


@pytest.mark.cluster
async def test_only_ended_jobs_of_a_known_role_reach_the_handlers(real_cluster: RealCluster,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    real = real_cluster
    ns = real.namespace(f"watch-{uuid.uuid4().hex[:6]}", simulated=True, pod_security=None)
    managed = jobs.MANAGED_BY
    real.kubectl("apply", "-f", "-", stdin=json.dumps(_job(ns, "before", {jobs.LABEL_ROLE: "trial", **managed})))
    real.wait_for(lambda: bool(real.get("job", "before", "-n", ns).get("status", {}).get("succeeded")), 60,
                  "the first Job's end")
    seen: list[tuple[str, str, bool]] = []

    def handler(role: str) -> Callable[[str, Obj], Any]:
        async def handle(type_: str, job: Obj) -> None:
            seen.append((role, job["metadata"]["name"], jobends.has_ended(job["status"].get("conditions"))))
        return handle

    monkeypatch.setattr(watching, "HANDLERS", {role: handler(role) for role in ("trial", "protocol", "verifier")})
    client = _client(real)
    events = watching.JobEvents(watching.Peering())
    async with _session(client) as session:
        watch = watching.Watch(client, session, watching.job_paths([ns])[0], watching.JOBS_SELECTOR, events)
        async with _running(watch):
            await _until(lambda: bool(watch.resource_version), "the listing")
            for name, labels in (("trial", {jobs.LABEL_ROLE: "trial", **managed}),
                                 ("verify", {jobs.LABEL_ROLE: "verifier", **managed}),
                                 ("other-role", {jobs.LABEL_ROLE: "sidecar", **managed}),
                                 ("not-ours", {jobs.LABEL_ROLE: "trial"})):
                real.kubectl("apply", "-f", "-", stdin=json.dumps(_job(ns, name, labels)))
            await _until(lambda: {n for _, n, _ in seen} >= {"trial", "verify"}, "the Jobs' ends", timeout=90)
            for name in ("other-role", "not-ours"):
                real.wait_for(lambda name=name: bool(real.get("job", name, "-n", ns).get("status", {}).get(  # type: ignore[misc]
                    "succeeded")), 60, f"{name}'s end")
            await asyncio.sleep(1)
    assert {(role, name) for role, name, _ in seen} == {("trial", "trial"), ("verifier", "verify")}, seen
    assert all(ended for _, _, ended in seen), "only events of ended Jobs are handed on"


def _ended_job(name: str, trial: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uuid.uuid4().hex,
                         "labels": {jobs.LABEL_ROLE: "trial", jobs.LABEL_TRIAL: trial, **jobs.MANAGED_BY}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}}


async def test_a_relisted_job_is_handed_on_only_when_its_trial_waits_and_a_paused_peer_hands_on_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    async def handle(type_: str, job: Obj) -> None:
        seen.append(job["metadata"]["name"])

    monkeypatch.setattr(watching, "HANDLERS", {"trial": handle})
    waiting = {"metadata": {"name": "t1", "namespace": "ns"}, "status": {"phase": "Running", "jobName": "t1-a0"}}
    caches.TRIALS.note(waiting, ended=False)
    level = logging.getLogger().level
    try:
        peering = watching.Peering()
        events = watching.JobEvents(peering)
        events(watching.LISTED, _ended_job("t1-a0", "t1"))  # the first listing: the Trial's listing repairs it
        events(watching.RELISTED, _ended_job("t2-a0", "t2"))  # nobody here waits for it
        events(watching.RELISTED, _ended_job("t1-a0", "t1"))
        logger = logging.getLogger("test.peering")
        logging.getLogger().setLevel(logging.WARNING)  # the operator's --quiet: kopf's INFO lines are still read
        peering.follow(logger)
        logger.info("Pausing operations in favour of [anchorage-operator-x].")  # kopf's own line
        events("MODIFIED", _ended_job("t1-a0", "t1"))
        resumed: list[bool] = []
        peering.resumed.append(lambda: resumed.append(True))
        logger.info("Resuming operations after the pause. Conflicting operators with the same priority are gone.")
        events("MODIFIED", _ended_job("t1-a0", "t1"))
        await asyncio.gather(*events.tasks)
        assert seen == ["t1-a0", "t1-a0"], seen
        assert resumed == [True]
    finally:
        caches.TRIALS.note(waiting, ended=True)
        logging.getLogger().setLevel(level)


async def test_a_runs_events_are_handled_one_at_a_time_the_latest_after_the_running_one() -> None:
    calls: list[tuple[str | None, str]] = []
    release = asyncio.Event()

    async def handle(type_: str | None, run: Obj) -> None:
        calls.append((type_, run["status"]["phase"]))
        if len(calls) == 1:
            await release.wait()  # the first event's handler is busy (a worker call)

    def run(phase: str) -> Obj:
        return {"metadata": {"name": "r", "namespace": "ns"}, "status": {"phase": phase}}

    events = watching.RunEvents(watching.Peering(), handle)
    events(watching.LISTED, run("Pending"))
    await asyncio.sleep(0)
    events("MODIFIED", run("Running"))  # comes while the first runs: replaced by the next one
    events("MODIFIED", run("Succeeded"))
    await asyncio.sleep(0.05)
    assert calls == [(None, "Pending")], "one handler call at a time per run"
    release.set()
    await asyncio.gather(*events.tasks)
    assert calls == [(None, "Pending"), ("MODIFIED", "Succeeded")]
    assert not events.busy and not events.pending


def test_zz_no_socket_is_left_open() -> None:
    """The watches above closed their connections (a leak would surface here as an unraisable ResourceWarning)."""
    gc.collect()
