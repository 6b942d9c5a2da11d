"""Simulated Anchorage pods: what the trial and verifier pods would write, without running them.

Given to the cluster fake's kubelet and to the sandbox node agent as their ``simulate`` hook
(``anchorage_devcluster.pods.Simulate``) by the operator tests, the real-cluster load tests and
``bench/kube_operator.py``: no container runs; the store receives the upload sidecar's completion marker
(``--marker``: ``upload.json`` for trials, ``verifier-upload.json`` for verifiers) and, for a verifier pod
(label ``anchorage.dev/role: verifier``), one ``score.json`` per ``--item`` of its ``score`` command, in the
shape ``kube.pod score`` writes (``ScoreRecord.to_dict()``): a synthetic perfect score (O-Eval 1, gradable)
marked ``"simulated": true``; for a trial's protocol pod (label ``anchorage.dev/role: protocol``, a
``verification.panel`` / ``.cbu`` step), the ``outcome.json`` ``kube.pod protocol`` writes: a synthetic block (panel
``confirmed``, CBU utility 1) marked ``"simulated": true`` that made no model call. Every container exits 0.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from anchorage.runtime.kube.jobs import LABEL_ROLE
from anchorage.scoring.records import ScoreRecord
from anchorage.store import open_store

Obj = dict[str, Any]


def _argv(container: Obj) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def _option(container: Obj, flag: str) -> str | None:
    """The value after the first ``flag`` in a container's command line, None without one."""
    argv = _argv(container)
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def _scores(containers: list[Obj]) -> dict[str, dict[str, Any]]:
    """What ``kube.pod score`` would write for a verifier pod: ``out`` → a synthetic perfect record."""
    records: dict[str, dict[str, Any]] = {}
    for container in containers:
        argv = _argv(container)
        if "score" not in argv:
            continue
        task = _option(container, "--task") or ""
        for flag, value in itertools.pairwise(argv):
            if flag == "--item":
                record = ScoreRecord(task=task, artifact=f"/scratch/in/{value.partition('=')[0]}", gradable=True,
                                     raw=1.0, raw_before_gates=1.0, oracle_raw=1.0, oracle_source="simulated",
                                     baseline_raw=0.0, baseline_source="simulated", gap=1.0, bo_branch="simulated",
                                     o_eval=1.0, bo_eval=1.0, scoring_version="simulated")
                records[value.partition("=")[2]] = {**record.to_dict(), "simulated": True}
    return records


def protocol_outcome(containers: list[Obj]) -> dict[str, Any] | None:
    """What ``kube.pod protocol`` would write for a protocol pod (``{"block", "failure"}``), None for other pods."""
    step = next((_option(c, "--step") for c in containers if "protocol" in _argv(c) and _option(c, "--step")), None)
    if step == "panel":
        block: dict[str, Any] = {"outcome": "confirmed", "status": "confirmed", "repaired": False, "votes": [],
                                 "launches": 0, "revisions": 0, "calls": 0, "mock_model": True,
                                 "solution_source": "simulated"}
    elif step == "cbu":
        block = {"utility": 1.0, "outcome": "scored", "rollouts": 0, "calls": 0, "neighbours": [],
                 "solution_source": "simulated"}
    else:
        return None
    return {"block": {**block, "simulated": True}, "failure": None}


def anchorage_pod(pod: Obj) -> dict[str, int]:
    """Write what an Anchorage pod would have written to the store; every container 'exits' 0."""
    containers = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
    env = {e["name"]: e.get("value", "") for c in containers for e in c.get("env", [])}
    if "ANCHORAGE_STORE" in env:
        store = open_store(env["ANCHORAGE_STORE"])
        dest = env["ANCHORAGE_DEST"].strip("/")
        files: dict[str, int] = {"artifacts": 1}
        role = (pod["metadata"].get("labels") or {}).get(LABEL_ROLE)
        if role == "verifier":
            items = _scores(pod["spec"]["containers"])
            for out, record in items.items():
                store.put_bytes("/".join(p for p in (dest, out, "score.json") if p), json.dumps(record).encode())
            files = {"": len(items)}
        outcome = protocol_outcome(pod["spec"]["containers"]) if role == "protocol" else None
        if outcome is not None:
            store.put_bytes(f"{dest}/outcome.json", json.dumps(outcome).encode())
            files = {"": 1}
        marker = _option(next((c for c in containers if c["name"] == "upload"), {}), "--marker") or "upload.json"
        store.put_bytes(f"{dest}/{marker}", json.dumps({"exit_code": 0, "files": files}).encode())
    return {c["name"]: 0 for c in containers}
