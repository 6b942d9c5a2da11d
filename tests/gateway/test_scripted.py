"""The scripted mock model: wire formats of the three APIs, the script's progress, usage as reported.

The real CLIs driving it through the gateway and the sandbox are in ``tests/agentclis/test_real_agents.py``;
here each API is spoken by hand, the way the CLIs do (what they send was read off the pinned versions).
"""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anchorage.errors import InputError
from anchorage.gateway.mock import MOCK_HEADER
from anchorage.gateway.scripted import RunningScripted, start_scripted
from anchorage.gateway.scripts import Script, ScriptBook, heredoc, oracle_script, task_slug

SLUG = "probe"
PROMPT = f"Solve it. Write your final answer to:\n/root/results/{SLUG}_result.json\n"
SCRIPT = f"""
task: {SLUG}
steps:
  - {{say: "First a look.", run: "ls /root/data", expect: "problem.md"}}
  - {{write: /tmp/work/x.txt, content: "a 'quoted' $HOME line"}}
  - {{run: "python3 solve.py", expect: "wrote"}}
final: "All done."
"""
CODEX_TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {
    "cmd": {"type": "string"}, "yield_time_ms": {"type": "number"}, "login": {"type": "boolean"}}}},
    {"type": "function", "name": "write_stdin", "parameters": {"type": "object", "properties": {
        "session_id": {"type": "number"}, "chars": {"type": "string"}}}},
    {"type": "custom", "name": "apply_patch"}]
CLAUDE_TOOLS = [{"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
                {"name": "Bash", "input_schema": {"type": "object", "required": ["command"], "properties": {
                    "command": {"type": "string"}, "description": {"type": "string"}, "timeout": {"type": "number"}}}}]
CHAT_TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {
    "command": {"type": "string"}, "timeout": {"type": "number"}, "description": {"type": "string"}}}}}]


@pytest.fixture()
def scripted(tmp_path: Path) -> Iterator[RunningScripted]:
    (tmp_path / f"{SLUG}.yaml").write_text(SCRIPT)
    with start_scripted(ScriptBook({}, tmp_path)) as running:
        yield running


def post(url: str, body: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(response.headers), response.read()


def events(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of each SSE frame; ``[DONE]`` kept as the string."""
    out: list[tuple[str | None, Any]] = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        name = next((line[7:] for line in frame.splitlines() if line.startswith("event: ")), None)
        data = "\n".join(line[6:] for line in frame.splitlines() if line.startswith("data: "))
        out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


# ----- Responses (codex) -----------------------------------------------------------------------------------

def responses_body(calls: list[tuple[str, str]] | None = None, **extra: Any) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user",
                                    "content": [{"type": "input_text", "text": PROMPT}]}]
    for ident, output in calls or []:
        items += [{"type": "function_call", "call_id": ident, "name": "exec_command", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": ident, "output": output}]
    return {"model": "gpt-5.5", "stream": True, "input": items, "tools": CODEX_TOOLS, **extra}


def test_responses_stream_has_the_full_event_sequence_and_a_function_call(scripted: RunningScripted) -> None:
    headers, raw = post(scripted.url + "/v1/responses", responses_body(reasoning={"effort": "high"}))
    assert headers[MOCK_HEADER] == "1"
    frames = events(raw)
    names = [name for name, _ in frames]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    assert [data["sequence_number"] for _, data in frames] == list(range(len(frames)))
    assert all(data["type"] == name for name, data in frames)
    for kind in ("output_item.added", "content_part.added", "output_text.delta", "output_text.done",
                 "content_part.done", "output_item.done", "function_call_arguments.delta",
                 "function_call_arguments.done"):
        assert f"response.{kind}" in names, kind
    done = [data["item"] for name, data in frames if name == "response.output_item.done"]
    assert [item["type"] for item in done] == ["message", "function_call"]
    assert done[0]["content"][0]["text"] == "[scripted mock] First a look."
    call = done[1]
    assert call["name"] == "exec_command" and "anc0p0_" in call["call_id"]
    assert json.loads(call["arguments"]) == {"cmd": "ls /root/data", "yield_time_ms": 30000}
    deltas = "".join(d["delta"] for n, d in frames if n == "response.function_call_arguments.delta")
    assert deltas == call["arguments"]
    final = frames[-1][1]["response"]
    assert final["status"] == "completed" and final["output"] == done and final["model"] == "gpt-5.5-mock"
    usage = final["usage"]
    assert usage["output_tokens_details"]["reasoning_tokens"] == 1024  # effort high
    assert usage["output_tokens"] > 1024 and usage["input_tokens_details"]["cached_tokens"] == 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    reply = scripted.model.recorded()[-1]
    assert (reply.api, reply.kind, reply.slug, reply.step, reply.usage) == ("responses", "tool", SLUG, 0, usage)


def test_the_script_advances_with_the_conversation_and_checks_outputs(scripted: RunningScripted) -> None:
    url = scripted.url + "/v1/responses"
    _, raw = post(url, responses_body([("call_anc0p0_x", "data/\nproblem.md\n")], stream=False))
    second = json.loads(raw)
    call = second["output"][-1]
    script_line = json.loads(call["arguments"])["cmd"]
    assert script_line == heredoc("/tmp/work/x.txt", "a 'quoted' $HOME line")
    assert second["usage"]["input_tokens_details"]["cached_tokens"] > 0  # a later turn reads the cache
    # a long command: codex answers with a running session, the model polls it
    running = "Process running with session ID 7\nOutput:\n"
    _, raw = post(url, responses_body([("call_anc0p0_x", "problem.md"), ("call_anc1p0_y", ""),
                                       ("call_anc2p0_z", running)], stream=False))
    poll = json.loads(raw)["output"][-1]
    assert poll["name"] == "write_stdin" and json.loads(poll["arguments"])["session_id"] == 7
    assert "anc2p1_" in poll["call_id"]
    # the poll's output shows the expected text: the script is over, the final message ends the turn
    _, raw = post(url, responses_body([("call_anc0p0_x", "problem.md"), ("call_anc1p0_y", ""),
                                       ("call_anc2p0_z", running), ("call_anc2p1_w", "wrote result.json")],
                                      stream=False))
    final = json.loads(raw)["output"]
    assert [item["type"] for item in final] == ["message"]
    assert final[0]["content"][0]["text"] == "[scripted mock] All done."


def test_an_output_without_the_expected_text_stops_the_model(scripted: RunningScripted) -> None:
    _, raw = post(scripted.url + "/v1/responses",
                  responses_body([("call_anc0p0_x", "ls: cannot access '/root/data'")], stream=False))
    output = json.loads(raw)["output"]
    assert [item["type"] for item in output] == ["message"]
    text = output[0]["content"][0]["text"]
    assert "Step 1 should have printed 'problem.md'" in text and "cannot access" in text
    assert scripted.model.recorded()[-1].kind == "off-script"


def test_requests_without_a_shell_tool_or_a_task_get_text(scripted: RunningScripted) -> None:
    _, raw = post(scripted.url + "/v1/responses", {"model": "m", "input": "Write a title for: " + PROMPT})
    assert json.loads(raw)["output"][0]["content"][0]["text"].startswith("[scripted mock]")
    assert scripted.model.recorded()[-1].kind == "helper"
    _, raw = post(scripted.url + "/v1/responses", {"model": "m", "input": "hello", "tools": CODEX_TOOLS})
    assert "no script" in json.loads(raw)["output"][0]["content"][0]["text"]


# ----- Anthropic Messages (claude-code) --------------------------------------------------------------------

def test_messages_stream_with_a_tool_use_block(scripted: RunningScripted) -> None:
    body = {"model": "claude-sonnet-4", "stream": True, "max_tokens": 32000, "tools": CLAUDE_TOOLS,
            "system": [{"type": "text", "text": "You are Claude Code."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]}
    _, raw = post(scripted.url + "/v1/messages", body)
    frames = events(raw)
    names = [name for name, _ in frames]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    starts = [data["content_block"] for name, data in frames if name == "content_block_start"]
    assert [block["type"] for block in starts] == ["text", "tool_use"]
    tool = starts[1]
    assert tool["name"] == "Bash" and tool["id"].startswith("toolu_anc0p0_") and tool["input"] == {}
    partial = "".join(d["delta"]["partial_json"] for n, d in frames
                      if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta")
    assert json.loads(partial) == {"command": "ls /root/data", "description": "First a look", "timeout": 600000}
    assert names.count("content_block_stop") == 2
    delta = frames[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use"
    start_usage = frames[0][1]["message"]["usage"]
    assert start_usage["output_tokens"] == 1 and delta["usage"]["output_tokens"] > 1
    # the tool result comes back as a user block; is_error is the CLI's business, the script reads the text
    body["messages"] += [{"role": "assistant", "content": [{"type": "tool_use", "id": tool["id"], "name": "Bash",
                                                            "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool["id"],
                                                       "content": [{"type": "text", "text": "problem.md"}]}]}]
    body["stream"] = False
    _, raw = post(scripted.url + "/v1/messages", body)
    message = json.loads(raw)
    assert message["stop_reason"] == "tool_use" and "anc1p0_" in message["content"][-1]["id"]
    usage = message["usage"]
    assert usage["cache_read_input_tokens"] > 0 and usage["cache_creation_input_tokens"] == 0


def test_count_tokens_is_answered(scripted: RunningScripted) -> None:
    body = {"model": "claude-sonnet-4", "messages": [{"role": "user", "content": "x" * 400}]}
    _, raw = post(scripted.url + "/v1/messages/count_tokens", body)
    assert json.loads(raw)["input_tokens"] == math.ceil(len(json.dumps(body)) / 4)


# ----- Chat Completions (opencode) -------------------------------------------------------------------------

def test_chat_stream_with_tool_call_deltas_and_a_usage_chunk(scripted: RunningScripted) -> None:
    body = {"model": "deepseek-flash", "stream": True, "stream_options": {"include_usage": True},
            "reasoning_effort": "low", "tools": CHAT_TOOLS, "messages": [{"role": "user", "content": PROMPT}]}
    _, raw = post(scripted.url + "/v1/chat/completions", body)
    frames = events(raw)
    assert frames[-1] == (None, "[DONE]")
    chunks = [data for _, data in frames[:-1]]
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if c["choices"]
             and "tool_calls" in c["choices"][0]["delta"]]
    assert calls[0]["id"].startswith("call_anc0p0_") and calls[0]["function"]["name"] == "bash"
    arguments = json.loads("".join(c["function"]["arguments"] for c in calls))
    assert arguments == {"command": "ls /root/data", "description": "First a look", "timeout": 600000}
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish == ["tool_calls"]
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["completion_tokens_details"]["reasoning_tokens"] == 64
    # the tool's result is a role "tool" message; the model goes on with step 2
    body["messages"] += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": calls[0]["id"], "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "problem.md"}]
    body["stream"] = False
    _, raw = post(scripted.url + "/v1/chat/completions", body)
    choice = json.loads(raw)["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and "anc1p0_" in choice["message"]["tool_calls"][0]["id"]


# ----- scripts -----------------------------------------------------------------------------------------------

def test_the_oracle_script_writes_the_solution_and_runs_it(tasks_dir: Path, tmp_path: Path) -> None:
    script = oracle_script(tasks_dir / "smoke-inventory", "smoke-inventory")
    writes = [s.write for s in script.steps if s.write]
    assert writes == ["/tmp/work/solve.py", "/tmp/work/solve.sh"]
    assert any(s.run and "bash solve.sh" in s.run for s in script.steps)
    assert script.steps[-1].expect == "artifact ok"
    book = ScriptBook({"smoke-inventory": tasks_dir / "smoke-inventory"})
    commands = book.commands("smoke-inventory")
    assert commands is not None
    solve = (tasks_dir / "smoke-inventory" / "solution" / "solve.py").read_text()
    assert solve in commands[1].line  # the file's text, byte for byte, inside the heredoc
    (tmp_path / "solution").mkdir()
    (tmp_path / "solution" / "solve.py").write_text("print(1)\n")
    with pytest.raises(InputError, match=r"no solution/solve\.sh"):
        oracle_script(tmp_path, "imported-anchor")
    assert ScriptBook({"imported-anchor": tmp_path}).script_for("imported-anchor") is None


def test_heredoc_round_trips_any_text(tmp_path: Path) -> None:
    import subprocess

    text = "line 1\nit's \"quoted\" $HOME `x` \\n\nEOF\n"
    target = tmp_path / "sub" / "f.txt"
    subprocess.run(["bash", "-c", heredoc(str(target), text)], check=True)
    assert target.read_text() == text


def test_script_files_are_validated(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("steps: [{run: ls, write: /x}]\n")
    with pytest.raises(InputError, match="exactly one of 'run'"):
        Script.load(path)
    path.write_text("steps: [{write: /x}]\n")
    with pytest.raises(InputError, match="needs exactly one of 'content' or 'from'"):
        Script.load(path)


def test_the_task_is_read_from_the_artifact_path_of_the_instruction() -> None:
    assert task_slug(PROMPT) == SLUG
    assert task_slug("write /root/results/cumcm-2024-a-dragon-dance_result.json now") == "cumcm-2024-a-dragon-dance"
    assert task_slug("no artifact here") is None
