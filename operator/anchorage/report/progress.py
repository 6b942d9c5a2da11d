"""Progress of a local run: a rich live bar (done / running / failed, ETA) on a terminal, plain lines otherwise.

Called by ``anchorage run``; receives the engine's events (``reused``, ``started``, ``finished``). A trial that
failed for the platform also prints its message (why, and the fix where the platform knows it: e.g. the install
command of a missing agent CLI), made readable (:mod:`anchorage.text`).
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO

from anchorage.campaigns.planning import PlannedTrial
from anchorage.text import readable
from anchorage.trials.phases import Phase
from anchorage.trials.records import TrialRecord


class Progress:
    """Counts trials and shows them; use as a context manager around the run."""

    def __init__(self, total: int, *, title: str, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.total, self.title = total, title
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.done = self.running = self.failed = self.infra = self.reused = 0
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[status]}"), TimeRemainingColumn(),
                                     console=Console(file=self.stream))
            self._bar.start()
            self._task = self._bar.add_task(self.title, total=self.total, status="")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()

    def status(self) -> str:
        return f"running {self.running} · failed {self.failed} · infra {self.infra} · resumed {self.reused}"

    def eta(self) -> str:
        finished = self.done - self.reused
        left = self.total - self.done
        if finished <= 0 or left <= 0:
            return "—"
        seconds = (time.monotonic() - self._started) / finished * left
        return f"{seconds:.0f}s"

    def event(self, kind: str, item: PlannedTrial, record: TrialRecord | None) -> None:
        with self._lock:
            self._count(kind, record)
            line = why = None
            if kind == "finished" and record is not None:
                line = (f"[{self.done}/{self.total}] {item.name}: {record.phase} ({record.reason})"
                        f" · {self.status()} · ETA {self.eta()}")
                if record.phase is Phase.INFRASTRUCTURE_FAILED:   # the platform's failure: why, and the fix
                    why = f"  {item.name}: {readable(record.message or 'no message recorded')}"
            if self._bar is not None:
                self._bar.update(self._task, completed=self.done, status=self.status())
                if why is not None:
                    from rich.markup import escape

                    self._bar.console.print(escape(why), style="yellow")
            elif line is not None:
                print(line, file=self.stream, flush=True)
                if why is not None:
                    print(why, file=self.stream, flush=True)

    def _count(self, kind: str, record: TrialRecord | None) -> None:
        if kind == "started":
            self.running += 1
            return
        if kind == "finished":
            self.running -= 1
        if kind == "reused":
            self.reused += 1
        self.done += 1
        phase = record.phase if record is not None else None
        if phase is Phase.FAILED:
            self.failed += 1
        elif phase is Phase.INFRASTRUCTURE_FAILED:
            self.infra += 1
