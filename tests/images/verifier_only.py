"""Run the scorer as the verifier image runs it, with only that image's Python packages importable.

``python verifier_only.py REQUIREMENTS PROFILE [--block]`` scores every task's ``tests/expected_result.json``
(``score_artifact`` with gates and the obligation layer on, as the verifier container's ``kube.pod score`` does)
and prints ``{task: {"o_eval": ..., "gates": [[name, status, severity], ...], "obligations": {...}}}`` as JSON.
With ``--block``, first every top-level module that is neither the standard library, ``anchorage``, nor
provided by a distribution of REQUIREMENTS (the image's locked requirements, dependencies included) fails to
import, as it would in the image; the entry modules of the image (``anchorage.cli``, the verifier container's
``anchorage.runtime.kube.pod``) are imported first. Used by tests/images/test_images.py.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import json
import re
import sys
import sysconfig
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def locked_names(requirements: Path) -> set[str]:
    """Distribution names of a requirements file (``name==version --hash=...`` lines and continuations)."""
    names = set()
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-") and not line.startswith("\\"):
            names.add(re.split(r"[=<>!~;\[ ]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def closure(names: set[str]) -> set[str]:
    """``names`` and the distributions they require (as installed here; extras left out)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name.lower().replace("_", "-"))
    return seen


def importable(requirements: Path) -> set[str]:
    """Top-level module names the image provides: the standard library, anchorage, its requirements' modules."""
    dists = closure(locked_names(requirements))
    provided = {module for module, owners in importlib.metadata.packages_distributions().items()
                if any(owner.lower().replace("_", "-") in dists for owner in owners)}
    return provided | set(sys.stdlib_module_names) | {"anchorage", "__main__", "_distutils_hack"}


class NotInImage(importlib.abc.MetaPathFinder):
    """Refuses top-level modules installed in site-packages (or elsewhere outside the standard library) that the
    image does not provide; the interpreter's own modules (private ones included) import as usual."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.stdlib = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib")}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        top = name.split(".")[0]
        if top in self.allowed or "." in name:
            return None
        found = importlib.machinery.PathFinder.find_spec(name, path)
        if found is None:
            return None
        origin = found.origin or ""
        if "site-packages" in origin or not any(origin.startswith(root) for root in self.stdlib):
            raise ImportError(f"{name} is not installed in the verifier image")
        return None


def main() -> None:
    requirements, profile = Path(sys.argv[1]), sys.argv[2]
    if "--block" in sys.argv:
        sys.meta_path.insert(0, NotInImage(importable(requirements)))
    import anchorage.cli
    import anchorage.runtime.kube.pod  # noqa: F401  (the verifier container's command)
    from anchorage.scoring import score_artifact
    from anchorage.tasks import load_task

    out: dict[str, Any] = {}
    for expected in sorted(REPO.glob("tasks/*/tests/expected_result.json")):
        task = load_task(expected.parents[1])
        record = score_artifact(task, expected, gates=True, lean=True, profile=profile).to_dict()
        out[task.slug] = {"o_eval": record["o_eval"], "gradable": record["gradable"],
                          "gates": [[g["name"], g["status"], g["severity"], g["message"]] for g in record["gates"]],
                          "obligations": {k: record["obligations"].get(k) for k in
                                          ("total", "proved", "unconfirmed", "failed", "missing")}}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
