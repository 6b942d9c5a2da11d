"""The control plane's pinned versions: ``anchorage_devcluster.binaries`` says what ``tools/kube`` builds, and
without the binaries it says what is missing and how to get them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from anchorage_devcluster import binaries

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "kube"


def _required(module: str, path: str) -> str:
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(path)}\s+(v\S+)", (TOOLS / module / "go.mod").read_text(), re.M)
    assert found, f"{module}/go.mod does not require {path}"
    return found.group(1)


def test_the_versions_are_the_ones_the_build_modules_pin() -> None:
    assert _required("kubernetes", "k8s.io/kubernetes") == binaries.KUBE_VERSION
    assert _required("etcd", "go.etcd.io/etcd/server/v3") == binaries.ETCD_VERSION
    assert _required("kueue", "sigs.k8s.io/kueue") == binaries.KUEUE_VERSION
    assert _required("kstatus", "sigs.k8s.io/cli-utils") == binaries.KSTATUS_VERSION
    staging = re.findall(r"^\s*(k8s\.io/\S+) => \1 (v\S+)$", (TOOLS / "kubernetes" / "go.mod").read_text(), re.M)
    assert staging and {v for _, v in staging} == {"v0." + binaries.KUBE_VERSION.removeprefix("v1.")}


def test_missing_binaries_are_named_with_the_way_to_build_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path))
    reason = binaries.find()
    assert isinstance(reason, str)
    assert str(tmp_path / "kube" / binaries.KUBE_VERSION / "kube-apiserver") in reason and "make kube" in reason
    monkeypatch.setenv("PATH", str(tmp_path))  # no Go anywhere
    monkeypatch.setattr(binaries, "GO_FALLBACK", tmp_path / "no-go")
    assert "Go is not installed" in str(binaries.find())


def test_a_missing_kueue_build_is_named_with_the_way_to_build_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path))
    reason = binaries.find_kueue()
    assert isinstance(reason, str) and "make kube" in reason
    assert str(binaries.kueue_paths()["kueue"]) in reason and binaries.KUEUE_VERSION in reason
