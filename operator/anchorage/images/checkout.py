"""The build context of Anchorage's images: a checkout of the repository.

The Dockerfiles under ``images/`` copy ``operator/``, ``prices/``, ``tasks/`` and ``pyproject.toml`` from the
repository's root, so ``anchorage images build|push`` runs only where those are: the checkout containing the current
folder, else the one this package is installed from (``pip install -e .``), else ``--context``. An installed wheel
alone has no Dockerfiles: :func:`find` then says how to get a checkout. The chart's ``appVersion``
(``charts/anchorage/Chart.yaml``) is the tag ``push`` gives the images, the one the chart pulls by default.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from anchorage.errors import InputError

#: What a checkout has (relative to its root): enough to build every image and to read the chart's tag.
MARKERS = ("images/operator/Dockerfile", "operator/anchorage/__init__.py", "charts/anchorage/Chart.yaml")
#: The checkout this package is installed from, when it is one (``<root>/operator/anchorage/images/checkout.py``).
INSTALLED = Path(__file__).resolve().parents[3]
CLONE_HINT = ("run it from a checkout of the Anchorage repository (git clone https://github.com/anchorage-dev/anchorage;"
              " the Dockerfiles read its operator/, prices/ and tasks/), or give the checkout as --context DIR")


def is_checkout(folder: Path) -> bool:
    return all((folder / marker).is_file() for marker in MARKERS)


def find(context: Path | None = None, *, cwd: Path | None = None) -> Path:
    """The checkout to build from: ``context`` (which must be one), else the one around ``cwd`` (default: the current
    folder), else the one this package was installed from; :class:`InputError` when there is none."""
    if context is not None:
        root = context.expanduser().resolve()
        if not is_checkout(root):
            missing = [m for m in MARKERS if not (root / m).is_file()]
            raise InputError(f"--context {context} is not a checkout of the Anchorage repository ({', '.join(missing)} "
                             "missing)", hint=CLONE_HINT)
        return root
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if is_checkout(folder):
            return folder
    if is_checkout(INSTALLED):
        return INSTALLED
    raise InputError(f"no checkout of the Anchorage repository around {start}: the images' Dockerfiles need it as "
                     "their build context", hint=CLONE_HINT)


def chart_version(root: Path) -> str:
    """The chart's ``appVersion``: the tag the chart's values default to for every image."""
    chart = yaml.safe_load((root / "charts" / "anchorage" / "Chart.yaml").read_text(encoding="utf-8"))
    return str(chart["appVersion"])
