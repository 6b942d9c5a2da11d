"""Transcripts: the request and response bodies of the trials whose token asks for them, redacted and capped.

The gateway's forwarder (:mod:`anchorage.gateway.server`) calls :meth:`Transcripts.add` once per finished
request of such a trial; the engine reads a trial's transcript with ``Gateway.transcript(trial_id)`` and
the operator with ``GET /admin/v1/transcripts/{trial}`` (JSON lines), to store it as the trial's
``transcript.jsonl`` artifact. Capture is opt-in twice: the token's claims ask for it (``transcript``
on ``issue_token`` / ``mint_token``) and the gateway's config allows it (``transcripts.enabled``).

One JSON line per request: ``ts``, ``endpoint``, ``path``, ``model``, ``status``, ``stream``,
``request`` (the client's body as it sent it), ``response`` (the JSON answer) or ``response_sse`` (the
stream's text as the client got it), ``usage`` (the metered counts) and ``unmetered`` (why, when the
request was unmetered). A body longer than ``max_body_bytes`` is kept as ``{"truncated": true,
"bytes": n, "head": "..."}``. Once a trial's file reaches ``max_bytes_per_trial`` one line
``{"truncated": true, ...}`` says so and later requests are left out.

Redaction, on each line as written: the gateway's secrets (provider keys, the admin token, the token the
request came with) and anything shaped like a trial token (``atk-...``) or a provider key (``sk-...``)
become ``[redacted]``. Files live in ``transcripts.directory`` (default ``<ledger_dir>/transcripts``,
else a temporary folder removed when the gateway stops), one per trial, named by a hash of its id.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REDACTED = "[redacted]"
#: Shapes of secrets redacted wherever they occur: trial tokens and common provider keys.
SECRET_SHAPES = re.compile(r"atk-[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}|sk-[A-Za-z0-9_-]{12,}")


def body_for_transcript(raw: bytes, limit: int) -> Any:
    """A body as kept: its JSON (when it is JSON and fits), else its text, cut at ``limit`` bytes."""
    if len(raw) > limit:
        return {"truncated": True, "bytes": len(raw), "head": raw[:limit].decode("utf-8", "replace")}
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


class Transcripts:
    """Per-trial transcript files (thread-safe: appended from the gateway's loop, read from others)."""

    def __init__(self, directory: Path | None, *, max_bytes_per_trial: int, max_body_bytes: int,
                 secrets: Iterable[str] = ()) -> None:
        self._temporary = directory is None
        self._directory = directory
        self.max_body_bytes = max_body_bytes
        self._max_bytes = max_bytes_per_trial
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._lock = threading.Lock()
        self._sizes: dict[str, int] = {}
        self._dropped: dict[str, int] = {}

    def _folder(self) -> Path:
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="anchorage-transcripts-"))
        self._directory.mkdir(parents=True, exist_ok=True)
        return self._directory

    def path(self, trial_id: str) -> Path:
        name = hashlib.sha256(trial_id.encode("utf-8")).hexdigest()[:32]
        return self._folder() / f"{name}.jsonl"

    def redact(self, text: str, extra: Iterable[str] = ()) -> str:
        for secret in [*self._secrets, *extra]:
            if secret:
                text = text.replace(secret, REDACTED)
        return SECRET_SHAPES.sub(REDACTED, text)

    def add(self, trial_id: str, record: dict[str, Any], *, token: str | None = None) -> None:
        """Append one request's record to the trial's transcript (redacted; left out past the cap)."""
        line = self.redact(json.dumps({"ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
                                       "trial": trial_id, **record}, ensure_ascii=False),
                           [token] if token else []) + "\n"
        data = line.encode("utf-8")
        with self._lock:
            path = self.path(trial_id)
            size = self._sizes.get(trial_id)
            if size is None:
                size = path.stat().st_size if path.exists() else 0
            if trial_id in self._dropped or size + len(data) > self._max_bytes:
                self._drop(trial_id, path)
                return
            with path.open("ab") as file:
                file.write(data)
            self._sizes[trial_id] = size + len(data)

    def _drop(self, trial_id: str, path: Path) -> None:
        """Leave a request out; the first one left out writes the line that says so."""
        dropped = self._dropped.get(trial_id, 0) + 1
        self._dropped[trial_id] = dropped
        if dropped == 1:
            note = {"truncated": True, "trial": trial_id,
                    "message": f"transcript cap of {self._max_bytes} bytes reached: later requests are left out"}
            with path.open("ab") as file:
                file.write((json.dumps(note) + "\n").encode("utf-8"))

    def read(self, trial_id: str) -> list[dict[str, Any]]:
        """The trial's transcript records (empty when none was kept)."""
        with self._lock:
            path = self.path(trial_id)
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            dropped = self._dropped.get(trial_id, 0)
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        if dropped and records and records[-1].get("truncated"):
            records[-1]["dropped_requests"] = dropped
        return records

    def close(self) -> None:
        """Remove the folder when it was a temporary one."""
        if self._temporary and self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
