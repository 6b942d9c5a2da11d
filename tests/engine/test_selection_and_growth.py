"""``anchorage run`` on a subset (--task/--entry/--limit), rerunning only infrastructure failures (--retry-infra),
and growing a finished campaign (more seeds, entries, tasks) under its name — through the real CLI, with its
exit codes and --json shape."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import anchorage_cli
from tests.engine.conftest import campaign_yaml

ENTRIES = """\
    - name: ok
      agent: {kind: command, command: ["/bin/sh", "-c", "echo '{}' > /root/results/smoke-inventory_result.json"]}
    - name: crash
      agent: {kind: command, command: ["/bin/sh", "-c", "exit 7"]}"""


def _run(manifest: Path, runs: Path, *flags: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    done = anchorage_cli("run", str(manifest), "--runs-dir", str(runs), "--json", "--no-plots", *flags)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def _names(runs: Path, campaign: str) -> set[str]:
    return {p.name for p in (runs / campaign).iterdir() if (p / "trial.json").is_file()}


def test_a_subset_then_the_rest_and_exit_codes(mechanism: object, tmp_path: Path) -> None:
    manifest = tmp_path / "c.yaml"
    manifest.write_text(campaign_yaml("sub", ENTRIES, seeds=2))
    code, out = _run(manifest, tmp_path / "runs", "--entry", "ok", "--limit", "1")
    [result] = out["results"]
    assert code == 0 and out["exit_code"] == 0                        # the one trial run was scored
    assert (result["ran"], result["resumed"], result["not_run"]) == (1, 0, 3)
    assert result["counts"] == {"Succeeded/completed": 1}
    board = {row["entry"]: row for row in result["leaderboard"]}
    assert (board["ok"]["cells_scored"], board["ok"]["cells_expected"]) == (1, 2)   # counted against the plan
    assert board["crash"]["cells_scored"] == 0 and board["crash"]["o_eval_mean"] is None   # planned, not run: no score
    assert set(result["outputs"]) >= {"json", "csv", "md", "html"}
    code, out = _run(manifest, tmp_path / "runs", "--entry", "ok")
    assert code == 0 and (out["results"][0]["ran"], out["results"][0]["resumed"]) == (1, 1)
    code, out = _run(manifest, tmp_path / "runs")                     # the rest: the crashing entry fails
    assert code == 1 and out["exit_code"] == 1 and out["results"][0]["counts"]["Failed/agent_error"] == 2
    assert len(_names(tmp_path / "runs", "sub")) == 4


def test_unknown_names_in_filters_are_bad_input_with_a_suggestion(mechanism: object, tmp_path: Path) -> None:
    manifest = tmp_path / "c.yaml"
    manifest.write_text(campaign_yaml("typo", ENTRIES))
    done = anchorage_cli("run", str(manifest), "--runs-dir", str(tmp_path / "runs"), "--task", "smoke-inventroy")
    assert done.returncode == 2
    assert "--task 'smoke-inventroy' is not in the campaign" in done.stderr and "did you mean 'smoke-inventory'" \
        in done.stderr
    done = anchorage_cli("run", str(manifest), "--runs-dir", str(tmp_path / "runs"), "--gateway-config", "nope.yaml")
    assert done.returncode == 2 and "nope.yaml" in done.stderr      # never silently ignored


def test_growing_a_finished_campaign_keeps_its_trials(mechanism: object, tmp_path: Path) -> None:
    manifest, runs = tmp_path / "c.yaml", tmp_path / "runs"
    one = '    - name: ok\n      agent: {kind: command, command: ["/bin/true"]}'
    manifest.write_text(campaign_yaml("grow", one, seeds=1))
    _run(manifest, runs)
    first = (runs / "grow" / "grow-ok-smoke-inventory-s0" / "trial.json").read_text()
    two = one + '\n    - name: other\n      agent: {kind: command, command: ["/bin/true"]}'
    manifest.write_text(campaign_yaml("grow", two, seeds=2))               # more seeds and a new entry
    code, out = _run(manifest, runs)
    assert code == 1 and (out["results"][0]["ran"], out["results"][0]["resumed"]) == (3, 1)  # /bin/true: no artifact
    assert (runs / "grow" / "grow-ok-smoke-inventory-s0" / "trial.json").read_text() == first   # untouched
    meta = json.loads((runs / "grow" / "campaign.json").read_text())
    assert meta["history"][0]["seeds"] == [1, 2] and meta["history"][0]["entries_added"] == ["other"]
    assert len(meta["trials"]) == 4
    manifest.write_text(campaign_yaml("grow", one, seeds=2))               # an entry removed: refused
    done = anchorage_cli("run", str(manifest), "--runs-dir", str(runs))
    assert done.returncode == 2 and "entry 'other' was removed" in done.stderr


def test_retry_infra_reruns_only_infrastructure_failures(mechanism: object, tmp_path: Path) -> None:
    manifest, runs = tmp_path / "c.yaml", tmp_path / "runs"
    manifest.write_text(campaign_yaml("retry", ENTRIES))
    _run(manifest, runs)
    trial = runs / "retry" / "retry-ok-smoke-inventory-s0" / "trial.json"
    record = json.loads(trial.read_text())
    forged = {**record, "phase": "InfrastructureFailed", "reason": "sandbox_error", "message": "the node went away"}
    trial.write_text(json.dumps(forged))          # as if the platform had failed this trial
    crash_before = (runs / "retry" / "retry-crash-smoke-inventory-s0" / "trial.json").read_text()
    code, out = _run(manifest, runs)              # a plain resume keeps it: exit 3 says so
    assert code == 3 and out["results"][0]["ran"] == 0
    code, out = _run(manifest, runs, "--retry-infra")
    assert out["results"][0]["ran"] == 1 and code == 1   # the crashing entry's own failure stays: exit 1
    rerun = json.loads(trial.read_text())
    assert rerun["phase"] == "Succeeded" and rerun["attempt"] == 2
    assert rerun["previous_attempts"] == [{"attempt": 1, "reason": "sandbox_error", "message": "the node went away"}]
    assert (runs / "retry" / "retry-crash-smoke-inventory-s0" / "trial.json").read_text() == crash_before
