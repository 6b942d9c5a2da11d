"""The Python agents get in the sandbox: the engine's virtualenv, shown at ``/opt/anchorage/venv``.

Called by :mod:`.sandbox` (the binds, files and links of the layout; the agent's PATH) and by callers
that name the interpreter in an agent's argv (:func:`python_path`).

Agents get the engine's own interpreter and packages (numpy, scipy, pandas, ... : the agent image's stack,
:data:`STACK`; the task reproductions need them — those the engine itself never imports come with the
``agent-stack`` extra, and an attempt on an interpreter without them is the platform's failure,
:func:`missing_stack`), but not where they live on the host: the virtualenv's ``lib`` folder is bound
at :data:`VENV`, next to a ``pyvenv.cfg`` written for the sandbox (the host's names the checkout in its
``command`` line) and ``bin/python3`` links to the base interpreter. The virtualenv's own ``bin`` is not
shown (its scripts' ``#!`` lines name the host path; ``python3 -m pip`` and the like work). Editable
installs' path hooks (``__editable__*``) and ``direct_url.json`` files that name the checkout are
covered by empty files (a layer of the ``lib`` folder's view, :mod:`.views`: no mount per run). The
base interpreter stays at its own path: a pyenv- or uv-built Python finds ``libpython`` through a
RUNPATH fixed at build time (under ``/usr`` it is bound with ``/usr``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

VENV = "/opt/anchorage/venv"
#: The scientific stack agents find in the sandbox (the agent image's, SPEC §1), by import name.
STACK = ("numpy", "scipy", "pandas", "sklearn", "statsmodels", "highspy", "openpyxl", "xlrd", "matplotlib")
STACK_HINT = "pip install 'anchorage-operator[agent-stack]' (make venv installs it)"
_SYSTEM_PREFIX = "/usr"
_KEPT_KEYS = ("home", "include-system-site-packages", "version", "implementation", "version_info")


@dataclass(frozen=True)
class Bind:
    """A host folder shown read-only at ``target``, the files at the ``cover`` paths (relative) emptied."""

    source: Path
    target: str
    cover: tuple[str, ...] = ()


@dataclass(frozen=True)
class Layout:
    """What the sandbox shows of the interpreter (``files`` and ``links`` are keyed by in-sandbox paths)."""

    python: str
    bin_dirs: tuple[str, ...]
    binds: tuple[Bind, ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()
    links: tuple[tuple[str, str], ...] = ()


def _base_prefixes() -> list[str]:
    """Folders of the base interpreter outside ``/usr`` (bound at their own paths)."""
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    prefixes.add(str(Path(os.path.realpath(sys.executable)).parent.parent))
    return sorted(p for p in prefixes if not (p == _SYSTEM_PREFIX or p.startswith(_SYSTEM_PREFIX + "/")))


def _pyvenv_cfg(venv: Path) -> bytes:
    kept = []
    for line in (venv / "pyvenv.cfg").read_text().splitlines():
        key = line.partition("=")[0].strip()
        if key in _KEPT_KEYS:
            kept.append(line.strip())
    return ("\n".join(kept) + "\n").encode()


def _covered(lib: Path) -> list[str]:
    """Paths (relative to ``lib``) of site-packages files that name host folders (editable installs' hooks)."""
    out: list[str] = []
    for site in sorted(lib.glob("python3*/site-packages")):
        hooks = [item for item in [*site.glob("__editable__*"), *site.glob("__pycache__/__editable__*")]
                 if item.is_file() and not item.is_symlink()]
        # a hook's compiled form names the checkout too, and Python may write it after this list was made (an
        # installer that compiles nothing, the first import): it is covered whether or not it exists yet
        compiled = [Path(importlib.util.cache_from_source(str(h))) for h in hooks if h.suffix == ".py"]
        out.extend(sorted({str(item.relative_to(lib)) for item in [*hooks, *compiled]}))
        for record in sorted(site.glob("*.dist-info/direct_url.json")):
            try:
                mentions_file = "file://" in record.read_text(errors="replace")
            except OSError:
                continue
            if mentions_file:
                out.append(str(record.relative_to(lib)))
    return out


@functools.lru_cache(maxsize=1)
def layout() -> Layout:
    """The interpreter's layout in the sandbox (computed once per process)."""
    base_binds = tuple(Bind(Path(p), p) for p in _base_prefixes())
    base_python = os.path.realpath(sys.executable)
    base_bin = str(Path(os.path.realpath(sys.base_prefix)) / "bin")
    if sys.prefix == sys.base_prefix:  # no virtualenv: the interpreter as it is
        return Layout(base_python, (base_bin,), base_binds)
    venv = Path(os.path.realpath(sys.prefix))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    links = [(f"{VENV}/bin/python3", base_python), (f"{VENV}/bin/python", "python3"),
             (f"{VENV}/bin/{version}", "python3")]
    if (venv / "lib64").is_symlink():
        links.append((f"{VENV}/lib64", "lib"))
    return Layout(
        python=f"{VENV}/bin/python3",
        bin_dirs=(f"{VENV}/bin", base_bin),
        binds=(*base_binds, Bind(venv / "lib", f"{VENV}/lib", tuple(_covered(venv / "lib")))),
        files=((f"{VENV}/pyvenv.cfg", _pyvenv_cfg(venv)),),
        links=tuple(links),
    )


def python_path(*, sandboxed: bool = True) -> str:
    """The interpreter to name in an agent's argv: in the sandbox, or (unsandboxed) on the host."""
    if sandboxed:
        return layout().python
    return str(Path(sys.prefix) / "bin" / "python3")


def agent_path(*, sandboxed: bool = True) -> str:
    """The PATH agents see: the interpreter's folders first (python3 with numpy & co), then the system's."""
    first = layout().bin_dirs if sandboxed else (str(Path(sys.prefix) / "bin"), str(Path(sys.base_prefix) / "bin"))
    return ":".join([*dict.fromkeys(first), "/usr/local/bin", "/usr/bin", "/bin"])


@functools.lru_cache(maxsize=1)
def missing_stack() -> str | None:
    """Why agents would not find the scientific stack in the sandbox (None: every module of :data:`STACK` is there).

    A trial run without it would judge the agent (and the oracle's reproduction) in an environment the benchmark
    does not define, so the driver records such an attempt as the platform's failure, with this reason."""
    absent = [name for name in STACK if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    return (f"this interpreter ({sys.executable}) lacks {', '.join(absent)} of the agents' scientific stack, which "
            f"the sandbox offers agents and the tasks' reproductions import; install it: {STACK_HINT}")
