"""Fixtures of the chart tests: the chart's path and ``render(values)``, which installs the chart with the
Helm library (helm-sdkpy) into the recording fake API of ``fakeapi.py`` and returns the rendered objects.

helm-sdkpy has no ``template``: an install without waiting renders exactly what ``helm template`` would,
and the release it returns carries the manifest and the hooks. Each render gets a fresh fake API;
renders are cached by their values.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from charts.fakeapi import FakeApi

CHART = Path(__file__).resolve().parents[2] / "charts" / "anchorage"
NAMESPACE = "anchorage"


@dataclass
class Rendered:
    """One render: the objects (hooks included, in order), the NOTES and the release's values."""

    objects: list[dict[str, Any]]
    notes: str

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, name: str) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
        return found[0]


@pytest.fixture(scope="session")
def chart_dir() -> Path:
    return CHART


@pytest.fixture(scope="session")
def helm() -> Any:
    return pytest.importorskip(
        "helm_sdkpy", reason="helm-sdkpy is not installed (pip install --ignore-requires-python helm-sdkpy)")


def install(helm: Any, values: dict[str, Any], release: str = "anchorage", namespace: str = NAMESPACE,
            absent: tuple[str, ...] = ()) -> dict[str, Any]:
    """``helm install RELEASE charts/anchorage -n NAMESPACE -f values`` into a fresh fake (serving no ``absent`` API
    group); raises helm's InstallError."""
    api = FakeApi(absent)
    try:
        config = helm.Configuration(namespace=namespace, kubeconfig=api.kubeconfig(namespace))
        result: dict[str, Any] = asyncio.run(
            helm.Install(config).run(release, str(CHART), values=values, wait=False, timeout=60))
    finally:
        api.stop()
    return result


def parse_release(result: dict[str, Any]) -> Rendered:
    docs = [d for d in yaml.safe_load_all(result.get("manifest") or "") if d]  # no manifest: nothing rendered
    hooks = result.get("hooks") or []
    if isinstance(hooks, str):  # helm-sdkpy hands nested lists over as their text in some versions
        raise AssertionError(f"unexpected hooks encoding: {hooks[:200]}")
    docs += [yaml.safe_load(h["manifest"]) for h in hooks]
    info = result.get("info") or {}
    notes = info.get("notes", "") if isinstance(info, dict) else ""
    return Rendered(docs, notes)


@pytest.fixture(scope="session")
def render(helm: Any) -> Callable[..., Rendered]:
    """``render(values, release=..., namespace=...) -> Rendered``; each distinct values set (and release name and
    namespace) is installed once, into its own fake."""
    cache: dict[str, Rendered] = {}

    def run(values: dict[str, Any], release: str = "anchorage", namespace: str = NAMESPACE) -> Rendered:
        key = json.dumps([values, release, namespace], sort_keys=True)
        if key not in cache:
            cache[key] = parse_release(install(helm, values, release, namespace))
        return cache[key]

    return run
