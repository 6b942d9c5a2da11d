"""The durable form of the gateway's ledger: an append-only JSON-lines journal, replayed at start-up.

:class:`anchorage.gateway.ledger.Ledger` appends one line per change — a token issued with its limits,
a finished request's token counts and cost, a revocation — and replays the file when the gateway
starts, so a restarted gateway still knows every trial's usage (the trial's cost is not under-reported)
and still refuses revoked tokens. At start-up the journal is also compacted: replaced (atomically,
``rename``) by one ``account`` line per trial.

Lines (``ledger.jsonl`` in the ledger directory)::

    {"op": "account", "trial": ..., "entry": ..., "campaign": ..., "budget_usd": ..., "rate_per_min": ...,
     "revoked": ..., "usage": {...}}
    {"op": "issue", "trial": ..., "entry": ..., "campaign": ..., "budget_usd": ..., "rate_per_min": ...}
    {"op": "use", "trial": ..., "model": ..., "counts": {...} | null, "cost": ... | null, "retries": ..., "error": ...,
     "unmetered": {"why": ..., "input_tokens": ..., "chunks": ..., "reserved_usd": ...}}   (unmetered: only when so)
    {"op": "revoke", "trial": ...}

Durability: lines are written by one writer thread, in batches (group commit: one ``write`` and one
``fdatasync`` for all the lines queued meanwhile, then one wake-up of the event loop for all of their
waiters). :meth:`Journal.append` returns the line's sequence number and :meth:`Journal.wait` returns
once it is on disk; the gateway waits so before a response ends, so usage of a request whose response
finished is never lost, and the event loop never blocks on the disk. With ``fsync``
off the lines are only handed to the OS (they survive a crash of the process, not of the machine).

A crash can leave the last line half written: it is ignored with a warning (its request never
finished). A bad line before the last one means the file was damaged otherwise; the gateway then
refuses to start rather than silently under-report usage.

While running, the journal is compacted again (by the writer thread, at a consistent point of the
queue) once the lines appended since the last compaction reach both ``compact_at`` (16 MiB) and the
size of the compacted file, so it stays within a small multiple of one line per trial.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from anchorage.errors import InfrastructureError

log = logging.getLogger("anchorage.gateway.journal")

JOURNAL_FILE = "ledger.jsonl"
COMPACT_AT_BYTES = 16 * 2**20  # compact while running once this much was appended (and more than the last compaction)


class Journal:
    """One ledger directory: :meth:`read` the records, :meth:`rewrite` them compacted, then :meth:`append`."""

    def __init__(self, directory: Path, *, fsync: bool = True, compact_at: int = COMPACT_AT_BYTES) -> None:
        self.directory = directory
        self.path = directory / JOURNAL_FILE
        self._fsync = fsync
        self._compact_at = compact_at
        self._cond = threading.Condition()
        self._queue: list[bytes | list[dict[str, Any]]] = []  # lines, and snapshots to compact to
        self._since_compaction = 0  # bytes queued since the last compaction
        self._snapshot_size = 0  # bytes of the last compacted file
        self._appended = 0  # sequence number of the newest queued record
        self._written = 0  # ... of the newest record written (or whose write failed)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop whose waiters are woken
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._closing = False
        self._fd: int | None = None
        self._thread: threading.Thread | None = None

    # ----- start-up --------------------------------------------------------------------------

    def read(self) -> list[dict[str, Any]]:
        """The journal's records in order (none when there is no journal yet)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            raw = self.path.read_bytes() if self.path.exists() else b""
        except OSError as exc:
            raise InfrastructureError(f"cannot read the gateway ledger {self.path}: {exc.strerror}",
                                      hint="check that ledger_dir exists and is writable by the gateway") from exc
        lines = raw.split(b"\n")
        records: list[dict[str, Any]] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict) or not isinstance(record.get("op"), str):
                    raise ValueError("not a ledger record")
            except ValueError as exc:
                if all(not rest.strip() for rest in lines[number:]):
                    log.warning("gateway ledger %s: ignoring its last line %d, written only in part (the "
                                "gateway stopped while writing it; that request had not finished)", self.path, number)
                    break
                raise InfrastructureError(
                    f"gateway ledger {self.path}: line {number} is not a ledger record ({exc}); the file was "
                    "damaged, and starting without its records would under-report trial usage",
                    hint="repair or remove that line by hand (or move the file aside to start an empty ledger)",
                ) from exc
            records.append(record)
        return records

    def rewrite(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace the journal by ``records`` atomically (write aside, fsync, rename), then open it for appends."""
        try:
            self._replace(list(records))
        except OSError as exc:
            raise InfrastructureError(f"cannot write the gateway ledger {self.path}: {exc.strerror}",
                                      hint="check that ledger_dir is writable and not full") from exc
        self._thread = threading.Thread(target=self._write_batches, name="anchorage-ledger", daemon=True)
        self._thread.start()

    def _replace(self, records: list[dict[str, Any]]) -> None:
        """Write ``records`` aside, fsync, rename over the journal, fsync the directory, append to it from now on."""
        temporary = self.path.with_name(JOURNAL_FILE + ".compacting")
        data = b"".join(encode(record) for record in records)
        with temporary.open("wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        self._snapshot_size = len(data)

    # ----- appends ---------------------------------------------------------------------------

    def append(self, record: dict[str, Any]) -> int:
        """Queue a record; returns its sequence number, for :meth:`wait` / :meth:`wait_sync` (0: not journalled)."""
        line = encode(record)
        with self._cond:
            if self._closing or self._thread is None:
                log.error("gateway ledger %s is closed: a %r record after shutdown is in memory only",
                          self.path, record.get("op"))
                return 0
            self._queue.append(line)
            self._appended += 1
            self._since_compaction += len(line)
            self._cond.notify_all()
            return self._appended

    def wants_compaction(self) -> bool:
        """True when the lines appended since the last compaction outweigh the compacted file (and ``compact_at``)."""
        return self._since_compaction >= max(self._compact_at, self._snapshot_size)

    def compact(self, records: list[dict[str, Any]]) -> None:
        """Queue a compaction to ``records`` — the whole state as of the lines queued so far (call it holding
        the ledger's lock, so no change slips in between): the writer replaces the file at that point."""
        with self._cond:
            if self._closing or self._thread is None:
                return
            self._queue.append(records)
            self._since_compaction = 0
            self._cond.notify_all()

    async def wait(self, seq: int) -> None:
        """Return once record ``seq`` was written (or its write failed, which was logged)."""
        with self._cond:
            if self._written >= seq:
                return
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            waiter = self._loop.create_future()
            self._waiters.append((seq, waiter))
        await waiter

    def wait_sync(self, seq: int, timeout: float = 30.0) -> None:
        """:meth:`wait` for threads other than the event loop's."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._written >= seq, timeout):
                raise TimeoutError(f"the gateway ledger {self.path} did not write within {timeout:g} s")

    def _write_batches(self) -> None:
        """The writer thread: one write (and fdatasync) per batch, then one wake-up of the event loop."""
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                batch, self._queue, last = self._queue, [], self._appended
            if not batch:
                return  # closing, nothing left
            lines: list[bytes] = []
            for item in [*batch, None]:
                if isinstance(item, bytes):
                    lines.append(item)
                    continue
                self._write_lines(lines)
                lines = []
                if item is not None:
                    self._compact_to(item)
            with self._cond:
                self._written = last
                self._cond.notify_all()
                wake = self._loop if self._waiters else None
            if wake is not None and not wake.is_closed():
                wake.call_soon_threadsafe(self._wake_waiters)

    def _wake_waiters(self) -> None:
        """On the event loop: resolve the waiters whose records are written."""
        with self._cond:
            ready = [w for seq, w in self._waiters if seq <= self._written]
            self._waiters = [(seq, w) for seq, w in self._waiters if seq > self._written]
        for waiter in ready:
            if not waiter.done():
                waiter.set_result(None)

    def _write_lines(self, lines: list[bytes]) -> None:
        if not lines:
            return
        try:
            self._write(b"".join(lines))
        except OSError as exc:
            log.error("gateway ledger %s: cannot write %d record(s): %s; that usage is in memory only",
                      self.path, len(lines), exc)

    def _compact_to(self, records: list[dict[str, Any]]) -> None:
        try:
            self._replace(records)
        except OSError as exc:  # the old file still has every line: keep appending to it
            log.error("gateway ledger %s: cannot compact (%s); appending to the uncompacted file", self.path, exc)
        else:
            log.info("gateway ledger %s compacted to %d trial(s)", self.path, len(records))

    def _write(self, data: bytes) -> None:
        """Append ``data`` whole or not at all (a failed write is cut off, so no torn line stays mid-file)."""
        assert self._fd is not None
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            if self._fsync:
                os.fdatasync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):  # else the next start ignores a torn last line
                os.ftruncate(self._fd, end)
            raise

    def close(self) -> None:
        """Write what is queued, then close the file."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(30)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
