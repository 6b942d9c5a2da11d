"""A campaign's passes read kopf's index of its Trials while Trial events change it.

kopf's indexers change the index in the event loop on every Trial event; the campaign's pass runs in a worker
thread. A pass that iterated the live index there failed now and then with "dictionary changed size during
iteration" — kopf then retries the failed timer only after 60 s, so a busy campaign created no Trial for a
minute at a time (the 2,000-trial bench sat at one count for a minute, then again). The handlers are invoked here
as kopf invokes them (a coroutine awaited in the loop, a plain function in a thread pool) while a task in the
same loop keeps adding Trials to the index, as the indexers do; thread switches are forced often so the race,
if the code has it, shows in every run.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
from kopf._core.engines.indexing import Store

from anchorage.controller import campaigns, kube
from anchorage.controller.campaigns import TrialState
from anchorage.runtime.kube.jobs import LABEL_CAMPAIGN
from anchorage.runtime.kube.pod import open_store
from anchorage.trials.phases import Phase, Reason
from anchorage.trials.records import TrialRecord


@pytest.fixture
def frequent_thread_switches() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


async def _as_kopf_invokes(handler: Callable[..., Any], **kwargs: Any) -> Any:
    """A coroutine handler is awaited in the event loop; a plain one runs in the loop's thread pool."""
    if inspect.iscoroutinefunction(handler):
        return await handler(**kwargs)
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(handler, **kwargs))


def _campaign(uid: str) -> dict[str, Any]:
    return {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
            "metadata": {"name": "busy", "namespace": "ns", "uid": uid, "generation": 1, "resourceVersion": "1"},
            "spec": {"tasks": ["smoke-inventory"], "seeds": 1, "parallelism": 1,
                     "entries": [{"name": "e", "agent": {"kind": "command", "command": ["true"]}}]}}


@pytest.mark.parametrize("handler", ["tick", "start"])
def test_a_pass_survives_trial_events_changing_the_index(handler: str, monkeypatch: pytest.MonkeyPatch,
                                                         frequent_thread_switches: None) -> None:
    created: list[str] = []
    monkeypatch.setattr(kube, "create_custom", lambda plural, body: created.append(body["metadata"]["name"]) or True)
    monkeypatch.setattr(kube, "post_event", lambda *args, **kwargs: None)
    store: Store[TrialState] = Store()
    for i in range(20_000):  # trials of an earlier plan (outside this one): counted as such, iterated every pass
        store._replace(("ns", f"old-{i}", f"uid-{i}"), TrialState(f"old-{i}", "Succeeded", True, 0.0, 0.0))
    index = {("ns", "busy"): store}

    async def scenario() -> list[dict[str, Any]]:
        stop = asyncio.Event()

        async def trial_events() -> None:  # what kopf's indexer does on each new Trial's event, in the loop
            i = 0
            while not stop.is_set():
                store._replace(("ns", f"new-{i}", f"new-uid-{i}"), TrialState(f"new-{i}", None, False, 0.0, 0.0))
                i += 1
                await asyncio.sleep(0)

        events = asyncio.create_task(trial_events())
        patches: list[dict[str, Any]] = []
        try:
            for n in range(5):
                campaigns._forget(f"uid-busy-{n}")
                patch: dict[str, Any] = {}
                await _as_kopf_invokes(getattr(campaigns, handler), body=_campaign(f"uid-busy-{n}"), status={},
                                       patch=patch, trials_by_campaign=index)
                patches.append(patch)
        finally:
            stop.set()
            await events
        return patches

    patches = asyncio.run(scenario())
    assert len(patches) == 5
    for patch in patches:
        assert patch["status"]["total"] == 1 and patch["status"]["phase"] == "Running"
        assert "outside the current plan" in patch["status"]["message"]
    assert len(created) == 5  # each campaign's one planned Trial, created by its pass


def _reconcile(body: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """A pass as the handlers run it, with an index that holds none of the campaign's Trials."""
    return campaigns.reconcile(cast(kopf.Body, body), cast(kopf.Status, status), ())


def _indexed(name: str) -> None:
    """What kopf does on a campaign Trial's event: call the indexer in its event loop."""
    asyncio.run(campaigns.trials_by_campaign(name=name, namespace="ns", labels={LABEL_CAMPAIGN: "busy"},
                                             annotations={}, status={"phase": "Running"}))


def test_a_trial_created_and_deleted_between_two_passes_holds_no_place(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    """Seen on a loaded CI machine: a pass created the campaign's next Trial, which ran and was cancelled (deleted)
    before the next pass looked. No pass ever saw it in the index, so it stayed "created, not indexed yet" and counted
    as active forever: with ``parallelism: 1`` the campaign created nothing more and never finished."""
    created: list[str] = []
    monkeypatch.setattr(kube, "create_custom", lambda plural, body: created.append(body["metadata"]["name"]) or True)
    monkeypatch.setattr(kube, "post_event", lambda *args, **kwargs: None)
    monkeypatch.setattr(kube, "get_custom", lambda plural, ns, name: None)  # deleted
    records = open_store(f"file://{tmp_path}")
    monkeypatch.setattr(campaigns, "store", lambda: records)
    body = _campaign("uid-quick")
    body["spec"]["seeds"] = 2
    campaigns._forget("uid-quick")
    status: dict[str, Any] = {}
    for seed in (0, 1):
        status.update(_reconcile(body, status))  # the index holds none of its Trials at any pass
        name = f"busy-e-smoke-inventory-s{seed}"
        assert created[-1] == name and status["running"] == 1
        _indexed(name)  # its events came; then it was cancelled: its record says so, and it is gone
        record = TrialRecord(name=name, entry="e", task="smoke-inventory", seed=seed, driver="operator",
                             phase=Phase.CANCELLED, reason=Reason.CANCELLED)
        records.put_bytes(f"busy/{name}/trial.json", json.dumps(record.to_json()).encode())
    for _ in range(2):  # a pass finds both records, the next counts them
        status.update(_reconcile(body, status))
    assert created == ["busy-e-smoke-inventory-s0", "busy-e-smoke-inventory-s1"]  # each once, never again
    assert (status["phase"], status["cancelled"], status["progress"]) == ("Succeeded", 2, "2/2")


def test_a_created_trial_the_watch_never_showed_is_looked_up_after_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Trial whose events the operator's watch missed (a re-list after it was gone) is asked for at the API
    server once it is :data:`~anchorage.controller.campaigns.SWEEP_SEC` old: gone, it holds no place."""
    created: list[str] = []
    asked: list[str] = []
    monkeypatch.setattr(kube, "create_custom", lambda plural, body: created.append(body["metadata"]["name"]) or True)
    monkeypatch.setattr(kube, "get_custom", lambda plural, ns, name: asked.append(name))
    monkeypatch.setattr(kube, "post_event", lambda *args, **kwargs: None)
    monkeypatch.setattr(campaigns, "_ended_in_store", lambda campaign, trial: None)
    clock = [1000.0]
    monkeypatch.setattr(campaigns.time, "monotonic", lambda: clock[0])
    body = _campaign("uid-missed")
    body["spec"]["seeds"] = 2
    campaigns._forget("uid-missed")
    status = _reconcile(body, {})
    clock[0] += campaigns.SWEEP_SEC / 2
    status.update(_reconcile(body, status))
    assert created == ["busy-e-smoke-inventory-s0"] and asked == []  # young: still on its way to the index
    clock[0] += campaigns.SWEEP_SEC
    _reconcile(body, status)
    assert asked == ["busy-e-smoke-inventory-s0"]
    assert created == ["busy-e-smoke-inventory-s0", "busy-e-smoke-inventory-s1"]  # no longer holding the one place


def test_a_trial_indexed_after_the_pass_took_its_view_still_holds_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen in CI: 7 Trials active at ``parallelism: 4``. A pass takes its view of the index, then the indexer has
    the events of the Trials the last pass created: they are in neither, yet they exist and run. The pass asks the
    API server and counts them; it creates nothing past the limit."""
    created: list[str] = []
    existing: set[str] = set()

    def create(plural: str, body: dict[str, Any]) -> bool:
        created.append(body["metadata"]["name"])
        existing.add(body["metadata"]["name"])
        return True

    monkeypatch.setattr(kube, "create_custom", create)
    monkeypatch.setattr(kube, "get_custom", lambda plural, ns, name: {"metadata": {"name": name}}
                        if name in existing else None)
    monkeypatch.setattr(kube, "post_event", lambda *args, **kwargs: None)
    monkeypatch.setattr(campaigns, "_ended_in_store", lambda campaign, trial: None)
    body = _campaign("uid-race")
    body["spec"]["seeds"] = 6
    body["spec"]["parallelism"] = 2
    campaigns._forget("uid-race")
    status = _reconcile(body, {})
    assert len(created) == 2
    for name in created:
        _indexed(name)  # their events came after the next pass's view of the index (it holds none of them)
    status.update(_reconcile(body, status))
    assert len(created) == 2  # both still hold their places
    existing.discard(created[0])  # one is deleted: its place is free again
    status.update(_reconcile(body, status))
    assert len(created) == 3


def test_a_finished_record_this_version_cannot_read_stops_the_pass(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """A planned Trial gone from the cluster whose stored record says it finished, in a shape this version cannot
    read (another version's): the pass stops with a TemporaryError naming it (kopf retries); it is never created
    again over its result."""
    created: list[str] = []
    monkeypatch.setattr(kube, "create_custom", lambda plural, body: created.append(body["metadata"]["name"]) or True)
    monkeypatch.setattr(kube, "post_event", lambda *args, **kwargs: None)
    monkeypatch.setattr(kube, "get_custom", lambda plural, ns, name: None)
    records = open_store(f"file://{tmp_path}")
    monkeypatch.setattr(campaigns, "store", lambda: records)
    records.put_bytes("busy/busy-e-smoke-inventory-s0/trial.json",
                      json.dumps({"phase": "Succeeded", "versions": {"anchorage": "9.9"}}).encode())
    campaigns._forget("uid-unreadable")
    with pytest.raises(kopf.TemporaryError, match=r"busy-e-smoke-inventory-s0/trial\.json.*written by 9\.9"):
        _reconcile(_campaign("uid-unreadable"), {})
    assert created == []
