"""Progress display: plain lines off a terminal, a rich bar on one; counts of done/running/failed."""

from __future__ import annotations

import io

from anchorage.campaigns.planning import PlannedTrial
from anchorage.manifests import AgentSpec, TrialSpec
from anchorage.report.progress import Progress
from anchorage.trials import Phase, Reason, TrialRecord


def _item(seed: int) -> PlannedTrial:
    return PlannedTrial(f"c-e-t-s{seed}", "e", "t", seed, TrialSpec(task="t", agent=AgentSpec(kind="oracle")))


def _record(phase: Phase, reason: Reason, message: str = "") -> TrialRecord:
    return TrialRecord(name="c-e-t-s0", entry="e", task="t", seed=0, driver="local", phase=phase, reason=reason,
                       message=message)


def _drive(progress: Progress) -> None:
    progress.event("reused", _item(0), _record(Phase.SUCCEEDED, Reason.COMPLETED))
    progress.event("started", _item(1), None)
    progress.event("started", _item(2), None)
    progress.event("finished", _item(1), _record(Phase.FAILED, Reason.TIMEOUT))


def test_plain_lines_when_not_a_tty() -> None:
    stream = io.StringIO()
    with Progress(4, title="c", stream=stream, live=False) as progress:
        _drive(progress)
    lines = stream.getvalue().splitlines()
    assert lines == [lines[0]] and lines[0].startswith("[2/4] c-e-t-s1: Failed (timeout)")
    assert "running 1 · failed 1 · infra 0 · resumed 1" in lines[0] and "ETA" in lines[0]
    assert (progress.done, progress.running, progress.failed, progress.reused) == (2, 1, 1, 1)


def test_rich_bar_on_a_terminal() -> None:
    stream = io.StringIO()
    with Progress(4, title="camp", stream=stream, live=True) as progress:
        _drive(progress)
    text = stream.getvalue()
    assert "camp" in text and "2/4" in text and "failed 1" in text


def test_an_infrastructure_failure_says_why_and_the_fix_as_it_happens() -> None:
    record = _record(Phase.INFRASTRUCTURE_FAILED, Reason.SANDBOX_ERROR,
                     "the codex CLI is not installed \x1b[2J— install it with: anchorage agents install codex")
    for live in (False, True):
        stream = io.StringIO()
        with Progress(1, title="c", stream=stream, live=live) as progress:
            progress.event("started", _item(0), None)
            progress.event("finished", _item(0), record)
        text = stream.getvalue()
        assert "install it with: anchorage agents install codex" in " ".join(text.split())
        assert "\x1b[2J" not in text                                   # the message is made readable
