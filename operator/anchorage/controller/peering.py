"""Whether kopf's peering has paused this operator: the operator's own watches dispatch nothing while it has.

Used by :mod:`anchorage.controller.watching` (Jobs, ScoringRuns), :mod:`anchorage.controller.pods` and
:mod:`anchorage.controller.policies`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable


class Peering:
    """Whether kopf's peering has paused this operator (a peer of higher priority is active).

    kopf keeps its pause to itself and logs it (``Pausing operations in favour of …`` / ``Pausing all operators …``,
    then ``Resuming operations …``) on its peering logger; :meth:`filter` is attached there and follows those lines.
    Without peering (``--standalone``) nothing is logged and the operator stays active.
    """

    def __init__(self) -> None:
        self.paused = False
        self.resumed: list[Callable[[], None]] = []

    def filter(self, record: logging.LogRecord) -> bool:
        """Follow kopf's pause and resume lines; pass on what the root logger's level would have let through."""
        msg = record.msg if isinstance(record.msg, str) else ""
        if msg.startswith("Pausing "):
            self.paused = True
        elif msg.startswith("Resuming ") and self.paused:
            self.paused = False
            for fn in self.resumed:
                fn()
        return record.levelno >= logging.getLogger().getEffectiveLevel()

    def follow(self, logger: logging.Logger) -> None:
        """Read ``logger``'s lines (at INFO at least, whatever the operator's log level: the pause is INFO)."""
        logger.addFilter(self.filter)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)


PEERING = Peering()
PEERING.follow(logging.getLogger("kopf._core.engines.peering"))
