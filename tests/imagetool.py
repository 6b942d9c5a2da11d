"""The image builder (``anchorage.images``) for the tests that build and run images.

Used by ``tests/images/test_built_images.py`` and the real cluster (``tests/kube_cluster.py``): buildah and
debootstrap are ensured — installed as root with apt-get where missing, else the calling test skips with the reason.
"""

from __future__ import annotations

import os
import shutil
from types import ModuleType

import pytest

from anchorage.images import building


def ready() -> ModuleType:
    """:mod:`anchorage.images.building` with its build programs present, or a skip that says which are missing."""
    missing = [p for p in ("buildah", "debootstrap") if shutil.which(p) is None]
    if missing and (os.geteuid() != 0 or shutil.which("apt-get") is None):
        pytest.skip(f"{', '.join(missing)} missing and not root to install them "
                    f"(apt-get install {' '.join(missing)}): the images cannot be built")
    building.ensure_tools()
    return building
