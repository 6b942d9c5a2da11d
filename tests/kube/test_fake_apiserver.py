"""The cluster fake behaves like the API server where the operator and kubectl rely on it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from anchorage_devcluster.apiserver import Fault
from anchorage_devcluster.serving import Cluster, running_cluster

TRIALS = "/apis/anchorage.dev/v1alpha1/namespaces/default/trials"
JOBS = "/apis/batch/v1/namespaces/default/jobs"
MERGE = {"Content-Type": "application/merge-patch+json"}


def trial(name: str = "t1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "metadata": {"name": name},
            "spec": {"task": "smoke-inventory", "agent": {"kind": "oracle"}, **spec}}


@pytest.fixture
async def fake(tmp_path: Path, repo_root: Path) -> AsyncIterator[Cluster]:
    async with running_cluster(tmp_path / "kubeconfig", crds_dir=repo_root / "crds", kubelet=False) as cluster:
        cluster.api.bookmark_interval = 0.2
        yield cluster


async def call(cluster: Cluster, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
    async with cluster.api.request(method, path, json=body, **kw) as response:
        return response.status, await response.json(content_type=None)


async def test_create_conflict_and_discovery(fake: Cluster) -> None:
    assert (await call(fake, "POST", TRIALS, trial()))[0] == 200
    status, body = await call(fake, "POST", TRIALS, trial())
    assert status == 409 and body["reason"] == "AlreadyExists"
    _, listing = await call(fake, "GET", "/apis/anchorage.dev/v1alpha1")
    trials = next(r for r in listing["resources"] if r["name"] == "trials")
    assert trials["shortNames"] == ["tr"] and trials["categories"] == ["anchorage"]


@pytest.mark.parametrize(("patch", "fragment"), [
    ({"seed": -1}, "spec.seed"),
    ({"agent": {"kind": "shell"}}, "spec.agent.kind"),
    ({"agent": {"kind": "command"}}, "needs agent.command"),
    ({"limits": {"cpus": 1000}}, "spec.limits.cpus"),
], ids=["bad-seed", "unknown-agent-kind", "command-without-command", "limit-too-high"])
async def test_invalid_trials_are_rejected_with_422(fake: Cluster, patch: dict[str, Any], fragment: str) -> None:
    status, body = await call(fake, "POST", TRIALS, trial(**patch))
    assert status == 422 and body["reason"] == "Invalid"
    assert fragment in body["message"] and body["message"].startswith('Trial.anchorage.dev "t1" is invalid')


async def test_unknown_fields_are_pruned_or_rejected_when_strict(fake: Cluster) -> None:
    status, body = await call(fake, "POST", f"{TRIALS}?fieldValidation=Strict", trial(colour="red"))
    assert status == 400 and 'strict decoding error: unknown field "spec.colour"' in body["message"]
    status, created = await call(fake, "POST", TRIALS, trial(colour="red"))
    assert status == 200 and "colour" not in created["spec"] and created["spec"]["task"] == "smoke-inventory"


async def test_stale_resource_version_is_a_conflict(fake: Cluster) -> None:
    _, created = await call(fake, "POST", TRIALS, trial())
    stale = created["metadata"]["resourceVersion"]
    _, patched = await call(fake, "PATCH", f"{TRIALS}/t1", {"spec": {"seed": 1}}, headers=MERGE)
    assert patched["metadata"]["generation"] == 2 and patched["metadata"]["resourceVersion"] != stale
    replace = {**patched, "metadata": {**patched["metadata"], "resourceVersion": stale}}
    status, body = await call(fake, "PUT", f"{TRIALS}/t1", replace)
    assert status == 409 and "has been modified" in body["message"]


async def test_status_subresource_is_separate_from_the_object(fake: Cluster) -> None:
    await call(fake, "POST", TRIALS, {**trial(), "status": {"phase": "Succeeded"}})
    _, obj = await call(fake, "GET", f"{TRIALS}/t1")
    assert "status" not in obj  # status on create is dropped
    await call(fake, "PATCH", f"{TRIALS}/t1/status", {"status": {"phase": "Running"}, "spec": {"seed": 5}},
               headers=MERGE)
    _, obj = await call(fake, "GET", f"{TRIALS}/t1")
    assert obj["status"] == {"phase": "Running"} and "seed" not in obj["spec"]
    assert obj["metadata"]["generation"] == 1
    await call(fake, "PATCH", f"{TRIALS}/t1", {"status": {"phase": "Failed"}}, headers=MERGE)
    assert (await call(fake, "GET", f"{TRIALS}/t1"))[1]["status"] == {"phase": "Running"}
    status, body = await call(fake, "PATCH", f"{TRIALS}/t1/status", {"status": {"phase": "Weird"}}, headers=MERGE)
    assert status == 422 and "status.phase" in body["message"]


async def test_finalizers_delay_deletion_and_owners_collect_dependents(fake: Cluster) -> None:
    _, owner = await call(fake, "POST", TRIALS, {**trial(), "metadata": {"name": "t1", "finalizers": ["x/y"]}})
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j1", "ownerReferences": [
        {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial", "name": "t1", "uid": owner["metadata"]["uid"]}]},
        "spec": {"template": {"spec": {"containers": [], "restartPolicy": "Never"}}}}
    await call(fake, "POST", JOBS, job)
    _, marked = await call(fake, "DELETE", f"{TRIALS}/t1")
    assert marked["metadata"]["deletionTimestamp"]
    assert (await call(fake, "GET", f"{JOBS}/j1"))[0] == 200  # still there: the owner is not gone yet
    await call(fake, "PATCH", f"{TRIALS}/t1", {"metadata": {"finalizers": None}}, headers=MERGE)
    assert (await call(fake, "GET", f"{TRIALS}/t1"))[0] == 404
    assert (await call(fake, "GET", f"{JOBS}/j1"))[0] == 404


async def _watch(cluster: Cluster, query: str, until: int, timeout: float = 5) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with cluster.api.request("GET", f"{TRIALS}?watch=true&{query}") as response:
        async def read() -> None:
            async for line in response.content:
                if line.strip():
                    events.append(json.loads(line))
                    if len(events) >= until:
                        return
        await asyncio.wait_for(read(), timeout)
    return events


async def test_watch_resumes_gives_bookmarks_and_410_when_too_old(fake: Cluster) -> None:
    _, created = await call(fake, "POST", TRIALS, trial())
    rv = created["metadata"]["resourceVersion"]
    await call(fake, "PATCH", f"{TRIALS}/t1", {"spec": {"seed": 3}}, headers=MERGE)
    events = await _watch(fake, f"resourceVersion={rv}&allowWatchBookmarks=true", until=2)
    assert [e["type"] for e in events] == ["MODIFIED", "BOOKMARK"]
    fake.api.expire("trials")
    gone = await _watch(fake, f"resourceVersion={rv}", until=1)
    assert gone[0]["type"] == "ERROR" and gone[0]["object"]["code"] == 410


async def test_dropped_watches_end_and_faults_are_injected(fake: Cluster) -> None:
    async with fake.api.request("GET", f"{TRIALS}?watch=true") as response:
        await asyncio.sleep(0.05)
        await fake.api.drop_watches()
        assert await asyncio.wait_for(response.content.read(), 5) == b""
    fake.api.faults.append(Fault(500, "POST", "/trials", times=1))
    assert (await call(fake, "POST", TRIALS, trial()))[0] == 500
    assert (await call(fake, "POST", TRIALS, trial()))[0] == 200


async def test_kubectl_get_prints_the_printer_columns(fake: Cluster) -> None:
    await call(fake, "POST", TRIALS, trial(seed=4))
    await call(fake, "PATCH", f"{TRIALS}/t1/status", {"status": {"phase": "Succeeded", "oEval": 1.0}}, headers=MERGE)
    table = await call(fake, "GET", TRIALS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    names = [c["name"] for c in table[1]["columnDefinitions"]]
    row = dict(zip(names, table[1]["rows"][0]["cells"], strict=True))
    assert row["Phase"] == "Succeeded" and row["O-Eval"] == 1.0 and row["Seed"] == 4
