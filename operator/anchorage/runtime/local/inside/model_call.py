"""One isolated model call of a verification protocol (panel verifier, reviser, solver, CBU rollout), in a sandbox.

Called by the local engine (:mod:`anchorage.runtime.local.verifying`) as ``python3 model_call.py REQUEST``
inside a fresh sandbox per call: ``REQUEST`` is the JSON file ``{"body": {...chat completions request...},
"run_id": "..."}`` the engine wrote into the call's folder (``/logs/agent/request.json``). The script sends
the body once to ``$OPENAI_BASE_URL/chat/completions`` (the gateway, relayed by the launcher) with the
per-call token ``$OPENAI_API_KEY`` and writes ``$ANCHORAGE_RESULTS_DIR/reply.json`` (``/root/results`` in
the sandbox): ``{"status": HTTP status, "mock": bool, "body": reply JSON or null, "error": text}``. Exit
status 0 when the gateway answered 200, 3 otherwise. No history, no retries (the gateway retries upstream
failures), no anchorage import: standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

_OUT = Path(os.environ.get("ANCHORAGE_RESULTS_DIR", "/root/results")) / "reply.json"


def _send(request: dict[str, Any]) -> dict[str, Any]:
    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}"}
    if request.get("run_id"):
        headers["x-anchorage-run"] = str(request["run_id"])
    http = urllib.request.Request(f"{base}/chat/completions", data=json.dumps(request["body"]).encode("utf-8"),
                                  headers=headers, method="POST")
    timeout = float(os.environ.get("ANCHORAGE_CALL_TIMEOUT", "600"))
    try:
        with urllib.request.urlopen(http, timeout=timeout) as response:
            return {"status": response.status, "mock": response.headers.get("x-anchorage-mock") == "1",
                    "body": json.loads(response.read().decode("utf-8")), "error": ""}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "mock": False, "body": None, "error": exc.read().decode("utf-8", "replace")[:500]}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return {"status": 0, "mock": False, "body": None, "error": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: model_call.py REQUEST.json\n")
        return 2
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    reply = _send(request)
    _OUT.write_text(json.dumps(reply), encoding="utf-8")
    return 0 if reply["status"] == 200 else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
