"""Garbage-collector settings of Anchorage's long-running servers (the operator and the model gateway).

Called once at start-up by ``anchorage.controller.settings`` (the operator) and ``anchorage gateway`` (and
the gateway's benchmark, which measures the gateway as it runs). Both allocate thousands of short-lived
objects per event or request (parsed bodies, aiohttp's and kopf's wrappers): with Python's default
threshold (700 net allocations) the collector runs every few requests and promotes live objects to the
older generations, whose passes walk every long-lived object. A higher young-generation threshold, and
the start-up objects (imports, settings) frozen out of the collector's walks, cut that work (the operator:
see docs/design-notes.md, "Operator"; the gateway: ~16 % CPU per json request in an A/B run).
"""

from __future__ import annotations

import gc
import os

#: Objects allocated (net) between young-generation collections (Python's default is 700); the environment
#: variable overrides it.
GC_THRESHOLD_ENV, GC_THRESHOLD = "ANCHORAGE_GC_THRESHOLD", 50000


def tune_gc() -> None:
    """Freeze what exists now and raise the young generation's threshold (``ANCHORAGE_GC_THRESHOLD``)."""
    raw = os.environ.get(GC_THRESHOLD_ENV, str(GC_THRESHOLD))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{GC_THRESHOLD_ENV} must be a positive whole number of objects (default {GC_THRESHOLD}), "
                         f"got {raw!r}: set it so or unset it")
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(int(raw), older, oldest)
