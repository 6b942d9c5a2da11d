"""How the operator reads a Job's end (``controller.jobends.job_result``), including the Job controller's deadline
race: a pod deleted at ``activeDeadlineSeconds`` that the next sync counts as failed (``BackoffLimitExceeded``)."""

from __future__ import annotations

from typing import Any

from anchorage.controller.evidence import attempt_end
from anchorage.controller.jobends import job_result


def _job(*conditions: tuple[str, str, str], deadline: int | None = 60,
         started: str = "2026-12-05T07:00:00Z") -> dict[str, Any]:
    spec = {"backoffLimit": 0, **({"activeDeadlineSeconds": deadline} if deadline is not None else {})}
    return {"spec": spec, "status": {"startTime": started, "conditions": [
        {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": when}
        for kind, reason, when in conditions]}}


def test_a_running_job_has_no_result_and_a_complete_one_is_complete() -> None:
    assert job_result({"status": {}}) is None
    assert job_result(_job(("FailureTarget", "BackoffLimitExceeded", "2026-12-05T07:00:10Z"))) is None
    assert job_result(_job(("Complete", "CompletionsReached", "2026-12-05T07:05:00Z"))) == "Complete"


def test_a_failure_judged_before_the_deadline_keeps_its_reason() -> None:
    failed = _job(("FailureTarget", "BackoffLimitExceeded", "2026-12-05T07:00:59Z"),
                  ("Failed", "BackoffLimitExceeded", "2026-12-05T07:01:05Z"))
    assert job_result(failed) == "BackoffLimitExceeded"  # the decision (59 s) came before the deadline (60 s)
    assert job_result(_job(("Failed", "BackoffLimitExceeded", "2026-12-05T07:00:30Z"))) == "BackoffLimitExceeded"


def test_a_pod_deleted_at_the_deadline_and_counted_as_failed_is_the_deadline() -> None:
    raced = _job(("FailureTarget", "BackoffLimitExceeded", "2026-12-05T07:01:01Z"),
                 ("Failed", "BackoffLimitExceeded", "2026-12-05T07:01:03Z"))
    assert job_result(raced) == "DeadlineExceeded"
    assert job_result(_job(("Failed", "BackoffLimitExceeded", "2026-12-05T07:01:00Z"))) == "DeadlineExceeded"
    assert job_result(_job(("Failed", "DeadlineExceeded", "2026-12-05T07:01:00Z"))) == "DeadlineExceeded"


def test_without_a_deadline_or_its_times_the_reason_stands() -> None:
    late = ("Failed", "BackoffLimitExceeded", "2026-12-05T09:00:00Z")
    assert job_result(_job(late, deadline=None)) == "BackoffLimitExceeded"
    assert job_result(_job(late, started="")) == "BackoffLimitExceeded"
    assert job_result(_job(("Failed", "BackoffLimitExceeded", ""))) == "BackoffLimitExceeded"


def test_the_raced_deadline_is_classified_as_the_backstop_not_as_the_agents_exit() -> None:
    """The agent's container was killed by the deletion (exit 143) after 20 s of a 300 s timeout: read as the Job's
    reason says, it would be the agent's failure; read as the deadline, the platform kept it from running."""
    pod = {"metadata": {"creationTimestamp": "2026-12-05T07:00:00Z"}, "status": {"containerStatuses": [
        {"name": "agent", "state": {"terminated": {"exitCode": 143, "reason": "Error", "startedAt": "2026-12-05T07:00:40Z",
                                                   "finishedAt": "2026-12-05T07:01:00Z"}}}]}}
    raced = _job(("FailureTarget", "BackoffLimitExceeded", "2026-12-05T07:01:01Z"))
    raced["status"]["conditions"].append({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                          "lastTransitionTime": "2026-12-05T07:01:02Z"})
    result = job_result(raced)
    assert result is not None
    end = attempt_end(result, {"oversized": None}, 300.0, pods=[pod])
    assert end.launcher_failure and "deadline" in end.launcher_failure and end.exit_code is None
    as_said = attempt_end("BackoffLimitExceeded", {"oversized": None}, 300.0, pods=[pod])
    assert as_said.exit_code == 143 and not as_said.launcher_failure
