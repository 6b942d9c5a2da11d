"""The image tool (``tools/images.py``) for the tests that build and run images.

Used by ``tests/images/test_built_images.py`` and the real cluster (``tests/kube_cluster.py``): the tool is loaded
from its file once (it is a script, not a package module), and buildah and debootstrap are ensured — installed
as root with apt-get where missing, else the calling test skips with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
NAME = "anchorage_images_tool"


def load() -> ModuleType:
    """``tools/images.py`` as a module (the same module object on every call)."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    spec = importlib.util.spec_from_file_location(NAME, REPO / "tools" / "images.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module


def ready() -> ModuleType:
    """The tool with its build programs present, or a skip that says which are missing and why."""
    module = load()
    missing = [p for p in ("buildah", "debootstrap") if shutil.which(p) is None]
    if missing and (os.geteuid() != 0 or shutil.which("apt-get") is None):
        pytest.skip(f"{', '.join(missing)} missing and not root to install them "
                    f"(apt-get install {' '.join(missing)}): the images cannot be built")
    module.ensure_tools()
    return module
