"""The built-in mock agent (labelled ``mock`` everywhere it appears), run inside the sandbox.

Called by the sandbox runner as ``python3 mock_agent.py INSTRUCTION``. It sends the instruction
(and the task's ``/root/data/output_schema.json`` when there is one) to the model gateway at
``$OPENAI_BASE_URL`` with ``$OPENAI_API_KEY`` — in demos and tests the gateway's deterministic mock
model — takes the first JSON object of the reply and writes it to ``$ANCHORAGE_ARTIFACT``. It
exists to exercise the whole path (sandbox → gateway → artifact → scorer) offline; its answers are
whatever the mock model returns, never a solution. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def _schema_text() -> str:
    data = Path(os.environ.get("ANCHORAGE_DATA_DIR", "/root/data"))
    schema = data / "output_schema.json"
    return schema.read_text(encoding="utf-8") if schema.is_file() else ""


def _ask(instruction: str) -> dict[str, Any]:
    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    messages = [
        {"role": "system", "content": "Answer with one JSON object that follows the output schema."},
        {"role": "user", "content": instruction},
    ]
    schema = _schema_text()
    if schema:
        messages.append({"role": "user", "content": f"output_schema:\n{schema}"})
    seed = int(os.environ.get("ANCHORAGE_SEED", "0"))
    body = json.dumps({"model": os.environ.get("ANCHORAGE_MODEL", "mock"), "messages": messages, "seed": seed}).encode()
    request = urllib.request.Request(
        f"{base}/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        reply: dict[str, Any] = json.loads(response.read())
    return reply


def _first_json_object(text: str) -> Any:
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char == "{":
            try:
                value, _ = decoder.raw_decode(text[start:])
            except ValueError:
                continue
            return value
    return None


def main(argv: list[str]) -> int:
    instruction = argv[0] if argv else ""
    try:
        reply = _ask(instruction)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        sys.stderr.write(f"mock agent: the gateway did not answer: {exc}\n")
        return 3
    content = str(reply.get("choices", [{}])[0].get("message", {}).get("content", ""))
    artifact = _first_json_object(content)
    logs = Path(os.environ.get("ANCHORAGE_LOGS_DIR", "/logs/agent"))
    (logs / "mock_agent_reply.json").write_text(json.dumps(reply, indent=2), encoding="utf-8")
    if artifact is None:
        sys.stderr.write("mock agent: the model's reply holds no JSON object; no artifact written\n")
        return 1
    target = Path(os.environ["ANCHORAGE_ARTIFACT"])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(artifact, indent=2), encoding="utf-8")
    print(f"mock agent: wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
