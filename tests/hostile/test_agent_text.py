"""Text an agent wrote never breaks a reader or reaches a person raw (issue 27, "Artifacts that break readers").

Two agents of one campaign write the smoke task's answer: one with lone surrogates (``"\\udcff"``: valid JSON,
invalid Unicode) in its values, one with terminal control sequences (window title, clear screen, hyperlinks,
an 8-bit CSI) in its values and its log. Through the real CLI: ``run``, ``report``, ``score`` (table and
``--json``), ``export inspect|harbor`` all succeed; the viewer's pages answer 200. Everything a person sees —
terminal output, report.html, every viewer page — holds no ESC, no raw control byte, and shows the replacement
character where the agent wrote invalid text. (Messages that quote a value with ``repr`` — the scorer's "got
'\x1b]0;…'" — and JSON views of a file show the escapes written out as text, which is harmless.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from tests.conftest import REPO

from anchorage.gateway.running import BackgroundServer
from anchorage.report.runs import LocalRuns
from anchorage.runtime.local import sandbox
from anchorage.tasks import load_task, resolve_task
from anchorage.viewer.app import make_app

pytestmark = pytest.mark.sandbox

REPLACEMENT = "\ufffd"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")   # what must never reach a terminal or a page
ESCAPES = "\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[H\x1b[31mred\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\\x9b31m"


def _agent(task_artifact: str, answer: str, log: bytes) -> list[str]:
    """A command agent (Python in the sandbox) that writes ``answer`` as the artifact and ``log`` on stdout."""
    code = (f"open('/root/results/{task_artifact}', 'w', encoding='utf-8').write({answer!r})\n"
            f"import sys; sys.stdout.buffer.write({log!r})\n")
    return [sandbox.sandbox_python(), "-c", code]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from anchorage.cli import main; main()", *args], cwd=REPO,
                          capture_output=True, text=True, encoding="utf-8", errors="surrogateescape", timeout=900,
                          check=False)


def _clean(text: str, where: str) -> None:
    bad = sorted({hex(ord(c)) for c in CONTROL.findall(text)})
    assert not bad, f"{where}: control characters {bad} reached a person"
    assert not re.search("[\udc80-\udcff]", text), f"{where}: bytes that are not UTF-8"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory, mechanism: object) -> tuple[Path, Path]:
    task = load_task(resolve_task("smoke-inventory"))
    data = json.loads(task.expected_result_path.read_text())

    def answer(note: str, cost: str) -> str:
        changed = json.loads(json.dumps(data))
        changed["problem_id"] = note
        changed["experiment_result"].update(note=note, total_annual_cost=cost)
        return json.dumps(changed)          # ASCII JSON: a lone surrogate is written "\udcff" (valid JSON)

    surrogate, escapes = answer("a lone \udcff surrogate", "79\udcff"), answer(ESCAPES, ESCAPES + "79")
    assert "\\udcff" in surrogate
    log = ESCAPES.encode("utf-8") + b" invalid \xff\xfe bytes\r\n" + b"\x1b[2Jcleared\n"
    entries = [{"name": "surrogate", "agent": {"kind": "command", "command": _agent(task.artifact_name, surrogate, log)}},
               {"name": "escapes", "agent": {"kind": "command", "command": _agent(task.artifact_name, escapes, log)}}]
    manifest = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign", "metadata": {"name": "agenttext"},
                "spec": {"tasks": ["smoke-inventory"], "entries": entries, "seeds": 1, "parallelism": 2}}
    root = tmp_path_factory.mktemp("agent-text")
    (root / "campaign.yaml").write_text(json.dumps(manifest))         # JSON is YAML
    done = _cli("run", str(root / "campaign.yaml"), "--runs-dir", str(root / "runs"))
    assert done.returncode in (0, 1), done.stdout + done.stderr         # scored (or the model's failure): no crash
    _clean(done.stdout + done.stderr, "anchorage run")
    return root / "runs", root


def test_run_and_report_write_a_whole_clean_report(hostile_run: tuple[Path, Path]) -> None:
    runs, _ = hostile_run
    run = runs / "agenttext"
    report = (run / "report.html").read_text(encoding="utf-8")
    assert len(report) > 10_000 and report.rstrip().endswith("</html>")
    _clean(report, "report.html (anchorage run)")
    assert REPLACEMENT in report                                          # the invalid text, visibly replaced
    done = _cli("report", str(run))
    assert done.returncode == 0, done.stderr
    rebuilt = (run / "report.html").read_text(encoding="utf-8")
    _clean(rebuilt, "report.html (anchorage report)")
    assert "<td>redclick79</td>" in rebuilt and "cleared" in rebuilt     # the value's sequences gone, its text kept
    for name in ("leaderboard.md", "leaderboard.csv", "leaderboard.json"):
        _clean((run / name).read_text(encoding="utf-8"), name)


def test_the_viewer_shows_every_page(hostile_run: tuple[Path, Path]) -> None:
    runs, _ = hostile_run
    server = BackgroundServer(make_app(LocalRuns(runs), ttl=0.0), name="viewer").start()
    try:
        base = f"http://127.0.0.1:{server.port}/campaigns/agenttext"
        pages = [f"{base}/", f"{base}/entries/surrogate/", f"{base}/entries/escapes/tasks/smoke-inventory"]
        for entry in ("surrogate", "escapes"):
            trial = f"{base}/trials/agenttext-{entry}-smoke-inventory-s0"
            pages += [trial, f"{trial}/show/artifacts/smoke-inventory_result.json", f"{trial}/show/agent/stdout.log",
                      f"{trial}/files/stdout.log", f"{trial}/files/score.json"]
        seen: dict[str, str] = {}
        for url in pages:
            with urllib.request.urlopen(url, timeout=30) as answer:
                assert answer.status == 200, url
                body = answer.read().decode("utf-8")                    # valid UTF-8: it decodes
            _clean(body, url)
            seen[url] = body
        assert REPLACEMENT in "".join(seen.values())
        trial = next(body for url, body in seen.items() if url.endswith("/trials/agenttext-escapes-smoke-inventory-s0"))
        assert "<td>redclick79</td>" in trial                           # the value's sequences removed, its text kept
        artifact = next(body for url, body in seen.items() if url.endswith("escapes-smoke-inventory-s0/show/artifacts/"
                                                                           "smoke-inventory_result.json"))
        assert "\\u001b]0;PWNED-TITLE" in artifact                     # the file as JSON: its escapes written out
    finally:
        server.stop()


@pytest.mark.parametrize("entry", ["surrogate", "escapes"])
def test_score_prints_clean_text(hostile_run: tuple[Path, Path], entry: str) -> None:
    runs, _ = hostile_run
    artifact = runs / "agenttext" / f"agenttext-{entry}-smoke-inventory-s0" / "artifacts" / "smoke-inventory_result.json"
    table = _cli("score", "--task", "smoke-inventory", str(artifact))
    assert table.returncode in (0, 1), table.stderr
    _clean(table.stdout + table.stderr, f"anchorage score ({entry})")
    as_json = _cli("score", "--task", "smoke-inventory", str(artifact), "--json")
    assert as_json.returncode in (0, 1), as_json.stderr
    _clean(as_json.stdout, f"anchorage score --json ({entry})")
    record = json.loads(as_json.stdout)
    if entry == "surrogate":
        assert REPLACEMENT in table.stdout and REPLACEMENT in json.dumps(record, ensure_ascii=False)
    else:
        value = next(m["value"] for m in record["metrics"] if m["path"].endswith("total_annual_cost"))
        assert value.startswith("\x1b]0;PWNED")                          # --json keeps the value (escaped, \u001b)


def test_exports_succeed(hostile_run: tuple[Path, Path]) -> None:
    runs, root = hostile_run
    harbor = _cli("export", "harbor", str(runs / "agenttext"), "-o", str(root / "jobs"))
    assert harbor.returncode == 0, harbor.stderr
    pytest.importorskip("inspect_ai.log", reason="the inspect extra is not installed (make venv installs it)")
    from inspect_ai.log import read_eval_log

    done = _cli("export", "inspect", str(runs / "agenttext"), "-o", str(root / "logs"), "--json")
    assert done.returncode == 0, done.stderr
    texts = []
    for path in json.loads(done.stdout)["logs"]:
        log = read_eval_log(path)
        assert log.samples and log.samples[0].scores
        score = log.samples[0].scores["o_eval"]
        texts.append(json.dumps(score.metadata, ensure_ascii=False))
        assert "\\udcff" in (score.answer or "") or "\\u001b" in (score.answer or "")   # the file as written
    assert any(REPLACEMENT in text for text in texts)                       # the values as read, made valid
