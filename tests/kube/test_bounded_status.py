"""A ScoringRun's published status stays small whatever the number of artifacts it scored
(``anchorage.runtime.kube.scores``): 100,000 scores give a status under 100 KB with the counts right and every summary
in the store's JSON lines; the lifecycle conditions keep their transition time while their status holds."""

from __future__ import annotations

import json

from anchorage.runtime.kube.conditions import carry, lifecycle, state_of
from anchorage.runtime.kube.scores import SCORES_FILE, SUMMARY_KEYS, run_status, scores_lines
from anchorage.runtime.kube.status import SCORES_IN_STATUS

ARTIFACTS = 100_000
LIMIT = 100 * 1024


def _scores(n: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(n):
        missing = i % 1000 == 999
        out.append({"entry": f"entry-{i % 100:03d}", "seed": i // 100, "artifact": f"s3://runs/t/e{i % 100}/{i}.json",
                    "raw": None if missing else 0.5, "oEval": None if missing else 0.25,
                    "boEval": -1.0 if missing else 0.1, "gradable": i % 3 != 0, "unscored": missing,
                    "recordUri": f"rescore/out/{i}/score.json"})
    return out


def test_a_run_of_100k_artifacts_publishes_a_bounded_status() -> None:
    scores = _scores(ARTIFACTS)
    status = run_status(scores=scores, ok=True, result="Complete", job_name="big-verify",
                        record_uri="s3://runs/rescore/out", scores_uri="s3://runs/rescore/out/scores.jsonl",
                        profile="paper@1", generation=3).patch()
    size = len(json.dumps(status, separators=(",", ":")))
    assert size <= LIMIT, f"status of {ARTIFACTS} scores is {size} B"
    assert (status["artifacts"], status["unscored"]) == (ARTIFACTS, ARTIFACTS // 1000)
    assert status["gradable"] == sum(1 for i in range(ARTIFACTS) if i % 3 != 0)
    assert len(status["scores"]) == SCORES_IN_STATUS and status["scores"][0]["artifact"] == scores[0]["artifact"]
    assert status["scoresUri"].endswith(SCORES_FILE) and status["observedGeneration"] == 3
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "True", "Complete": "True", "Failed": "False", "Reconciling": "False", "Stalled": "False"}

    lines = scores_lines(scores).decode().splitlines()
    assert len(lines) == ARTIFACTS
    assert json.loads(lines[999]) == {k: v for k, v in scores[999].items()
                                      if k in SUMMARY_KEYS and v is not None}


def test_a_failed_run_says_so_in_its_conditions() -> None:
    status = run_status(scores=[], ok=False, result="Failed", job_name="x-verify", record_uri="s3://r/x",
                        scores_uri=None, profile="paper@1").patch()
    assert status["phase"] == "Failed" and status["message"] == "verifier job ended: Failed"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "False", "Complete": "False", "Failed": "True", "Reconciling": "False", "Stalled": "True"}


def test_lifecycle_conditions_by_state_and_their_transition_times() -> None:
    flags = {state: {c["type"]: c["status"] == "True" for c in lifecycle(state_of(phase, trial=True), phase)}
             for phase, state in [("Running", "working"), ("Succeeded", "succeeded"), ("Failed", "failed"),
                                  ("InfrastructureFailed", "failed"), ("Cancelled", "cancelled")]}
    assert flags["working"] == {"Complete": False, "Failed": False, "Reconciling": True, "Stalled": False}
    assert flags["succeeded"] == {"Complete": True, "Failed": False, "Reconciling": False, "Stalled": False}
    assert flags["failed"] == {"Complete": False, "Failed": True, "Reconciling": False, "Stalled": True}
    assert not any(flags["cancelled"].values())
    assert state_of("Suspended", trial=False) == "suspended"

    before = [{**c, "lastTransitionTime": "2026-01-01T00:00:00Z"} for c in lifecycle("working", "Running")]
    after = {c["type"]: c["lastTransitionTime"] for c in carry(before, lifecycle("succeeded", "Succeeded"))}
    assert after["Failed"] == after["Stalled"] == "2026-01-01T00:00:00Z"  # unchanged: False before and after
    assert after["Complete"] != "2026-01-01T00:00:00Z" and after["Reconciling"] != "2026-01-01T00:00:00Z"


def test_kstatus_the_library_reads_every_phase_as_the_docstring_says() -> None:
    """cli-utils' kstatus itself (``tools/kube/kstatus``) over a Trial in each phase and a campaign in each of its
    own: at work is InProgress, ended well or cancelled or suspended is Current, ended badly is Failed, and a status
    written for an older generation is InProgress whatever it says."""
    import subprocess

    import pytest

    from anchorage_devcluster import binaries

    program = binaries.kstatus()
    if isinstance(program, str):
        pytest.skip(program)
    cases = {("Trial", p): s for p, s in [("Pending", "InProgress"), ("Running", "InProgress"), ("Succeeded", "Current"),
                                          ("Failed", "Failed"), ("InfrastructureFailed", "Failed"),
                                          ("Cancelled", "Current")]}
    cases |= {("VerificationCampaign", p): s for p, s in [("Running", "InProgress"), ("Succeeded", "Current"),
                                                          ("Failed", "Failed"), ("Suspended", "Current")]}
    items = [{"apiVersion": "anchorage.dev/v1alpha1", "kind": kind, "metadata": {"name": f"{kind}-{phase}".lower(),
                                                                                 "generation": 2},
              "status": {"phase": phase, "observedGeneration": 2,
                         "conditions": lifecycle(state_of(phase, trial=kind == "Trial"), phase, "", 2)}}
             for kind, phase in cases]
    stale = {**items[2], "metadata": {"name": "stale", "generation": 3}}  # Succeeded, but for generation 2
    listed = {"apiVersion": "v1", "kind": "List", "items": [*items, stale]}
    out = subprocess.run([str(program)], input=json.dumps(listed), capture_output=True, text=True, check=True,
                         timeout=60)
    read = {v["name"]: v["status"] for v in map(json.loads, out.stdout.splitlines())}
    assert read == {**{f"{k}-{p}".lower(): s for (k, p), s in cases.items()}, "stale": "InProgress"}
