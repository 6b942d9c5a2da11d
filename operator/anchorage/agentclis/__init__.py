"""The agent CLIs (codex, claude-code, opencode): pinned versions, where they are installed, how agents see them.

Called by ``anchorage agents install|list`` (:mod:`anchorage.commands.agents`), by the agent kinds'
plans and both drivers (which folder to bind, which ``bin`` goes on ``PATH``, the pre-flight check).

One layout everywhere: each CLI lives in ``<cli>@<version>/bin`` under a tools root — on a laptop
``<cache>/agents`` (``$ANCHORAGE_CACHE``, else ``$XDG_CACHE_HOME/anchorage``, else
``~/.cache/anchorage``), bound read-only into the sandbox at :data:`AGENTS_MOUNT`; in the agent image
the same folders are built at :data:`AGENTS_MOUNT` itself. So an agent finds ``codex`` at
``/opt/anchorage/agents/codex@<version>/bin/codex`` in both drivers. Versions: ``versions.json``
(read with :func:`pins`); installs: :mod:`anchorage.agentclis.installing`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from anchorage.agentclis.installing import MARKER, Pin, load_pins, read_marker

AGENTS_MOUNT = "/opt/anchorage/agents"

__all__ = ["AGENTS_MOUNT", "MARKER", "Pin", "ToolState", "bin_dir", "cache_root", "install_hint", "missing",
           "pin", "pins", "sandbox_binds", "state", "tools_root"]


def cache_root() -> Path:
    """Anchorage's cache folder: ``$ANCHORAGE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/anchorage``."""
    explicit = os.environ.get("ANCHORAGE_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "anchorage"


def tools_root() -> Path:
    """Where ``anchorage agents install`` puts the CLIs on this machine."""
    return cache_root() / "agents"


def pins() -> dict[str, Pin]:
    """The pinned CLIs by agent kind (``codex``, ``claude-code``, ``opencode``)."""
    return load_pins()


def pin(kind: str) -> Pin | None:
    return pins().get(kind)


def bin_dir(kind: str) -> str:
    """The CLI's ``bin`` folder as agents see it (sandbox and agent image alike)."""
    found = pin(kind)
    if found is None:
        raise KeyError(f"no pinned CLI for agent kind {kind!r}")
    return f"{AGENTS_MOUNT}/{found.folder_name}/bin"


def install_hint(kind: str) -> str:
    return f"anchorage agents install {kind}"


@dataclass(frozen=True)
class ToolState:
    """One pinned CLI on this machine: installed or not, and where."""

    pin: Pin
    folder: Path
    installed: bool
    version_output: str = ""
    installed_at: str = ""


def state(kind: str, root: Path | None = None) -> ToolState:
    found = pin(kind)
    if found is None:
        raise KeyError(f"no pinned CLI for agent kind {kind!r}")
    root = root or tools_root()
    record = read_marker(root, found)
    return ToolState(found, root / found.folder_name, record is not None,
                     str((record or {}).get("version_output", "")), str((record or {}).get("installed_at", "")))


def missing(kind: str, root: Path | None = None) -> str | None:
    """Why the sandbox would not find the pinned CLI of ``kind`` (None: it is installed)."""
    found = state(kind, root)
    if found.installed:
        return None
    return (f"the {kind} CLI ({found.pin.spec}) is not installed in {found.folder} — agents cannot download "
            f"tools; install it with: {install_hint(kind)}")


def sandbox_binds(kind: str, root: Path | None = None) -> dict[str, Path]:
    """The read-only bind that shows the installed CLI at :data:`AGENTS_MOUNT` in the sandbox."""
    found = state(kind, root)
    return {f"{AGENTS_MOUNT}/{found.pin.folder_name}": found.folder}
