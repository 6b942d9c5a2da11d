"""Files written whole or not at all: the data goes to a temporary file beside the target, is flushed to disk, then
renamed over the target, so a crash, a kill -9 or a full disk never leaves a half-written record or report behind
(a reader sees the old file or the new one).

Used for the local engine's records (``trial.json``, ``score.json``, the campaign's state) and the report's outputs.
The artifact store (:mod:`anchorage.store`) and the gateway's journal keep their own variants: the store links
exclusively, the journal also syncs its directory and appends after the swap.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file, fsync and rename (all or nothing)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """``data`` as indented JSON with sorted keys (anything else as its ``str``), written by :func:`write_atomic`."""
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str).encode())
