"""A task's reproduction script (``tasks/<slug>/solution/solve.py``) as a module, for the tests of the models
inside the reproductions (``test_mcm_models.py``, ``test_reproduction_models.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def load(slug: str) -> ModuleType:
    """Import ``tasks/<slug>/solution/solve.py`` under a name of its own (``solve_<slug>``)."""
    name = "solve_" + slug.replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, TASKS / slug / "solution" / "solve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
