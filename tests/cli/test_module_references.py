"""Every module the package's docstrings and ``docs/`` name (``anchorage.x.y``, in ``:mod:`` roles or double
backquotes) exists, and every ``module.attribute`` they name is found: a rename or a removal leaves no stale pointer
(two docstrings named ``anchorage.scoring.report`` and ``anchorage.lean.checking`` long after both were gone)."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAME = re.compile(r"(?::(?:mod|func|class|data|meth|attr):`~?|``)(anchorage(?:_devcluster)?(?:\.\w+)+)")
API_GROUP = "anchorage.dev"  # the custom resources' API group (``anchorage.dev/trial``), no module


def _found(dotted: str) -> bool:
    """A module, or an attribute (perhaps of an attribute) of the longest importable module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            continue
        obj: object = importlib.import_module(module)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_named_module_and_attribute_exists() -> None:
    sources = [*sorted((REPO / "operator" / "anchorage").rglob("*.py")),
               *sorted((REPO / "devcluster" / "anchorage_devcluster").rglob("*.py")),
               *sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
    stale = sorted({f"{path.relative_to(REPO)}: {name}" for path in sources
                    for name in NAME.findall(path.read_text(encoding="utf-8"))
                    if name != API_GROUP and not _found(name)})
    assert not stale, "names of modules or attributes that do not exist:\n" + "\n".join(stale)
