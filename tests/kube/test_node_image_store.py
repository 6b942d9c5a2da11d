"""A real node's image store stays bounded across clusters (``anchorage_devcluster.realnode``).

The store lives in the cache per slot and node and the kubelet collects no image, so every cluster's start prunes it
to that cluster's images (``LocalCluster.add_real_node``): the selection (:func:`realnode.stale_images`) keeps every
reference of a kept image and drops all else — other tags of Anchorage's images, another registry's, test-built ones;
a store over the limit when its node is prepared is wiped. No cluster is started here (the real-cluster evidence is
a cluster started twice with a foreign image on a node in between; see ``bench/README.md``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from anchorage_devcluster import cluster, realnode

HEADER = "REF TYPE DIGEST SIZE PLATFORMS LABELS"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MANAGED = "io.cri-containerd.image=managed"


def _row(ref: str, digest: str, labels: str = MANAGED) -> str:
    return f"{ref} {MANIFEST} sha256:{digest * 64} 279.4 MiB linux/amd64 {labels}"


def test_a_prune_keeps_every_reference_of_the_sessions_images_and_removes_the_rest() -> None:
    registry = "10.200.0.1:5000"
    listing = "\n".join([
        HEADER,
        # the session's operator image: its tag, digest reference and the runtime's ID share one target
        _row(f"{registry}/anchorage/operator:23d57db730c6", "a"),
        _row(f"{registry}/anchorage/operator@sha256:{'a' * 64}", "a"),
        _row(f"sha256:{'c' * 64}", "a"),
        _row(f"{registry}/anchorage/pause:2bdd84412a69", "b"),
        # an earlier build of the same repository, with its references
        _row(f"{registry}/anchorage/operator:0ld0ld0ld0ld", "d"),
        _row(f"sha256:{'e' * 64}", "d"),
        # another registry's image (the private one on port 5001) and a test-built image of this registry
        _row("10.200.0.1:5001/private/agent:v1", "f"),
        _row(f"{registry}/tests/built:1", "1"),
        # the runtime's pinned image stays whatever it is
        _row("registry.example/pause:3.10", "2", f"{MANAGED},io.cri-containerd.pinned=pinned"),
        "",
    ])
    keep = {f"{registry}/anchorage/operator:23d57db730c6", f"{registry}/anchorage/pause:2bdd84412a69",
            f"{registry}/anchorage/coredns:f440d5e106e1"}  # not on this node: nothing to keep of it
    assert realnode.stale_images(listing, keep) == [
        f"{registry}/anchorage/operator:0ld0ld0ld0ld", f"sha256:{'e' * 64}", "10.200.0.1:5001/private/agent:v1",
        f"{registry}/tests/built:1"]
    assert realnode.stale_images(HEADER + "\n", keep) == []  # an empty store
    assert realnode.stale_images("", keep) == []  # ctr failed: nothing is removed


def _node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "node-1") -> realnode.RealNode:
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path / "cache"))
    network: Any = SimpleNamespace(slot=SimpleNamespace(number=7))
    binaries: Any = SimpleNamespace()
    return realnode.RealNode(name, 1, network, binaries, logs=tmp_path / "logs")


def test_a_store_over_the_limit_is_wiped_and_one_under_it_is_kept(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    node = _node(tmp_path, monkeypatch)
    assert node.images == tmp_path / "cache" / "nodes" / "7-node-1" / "containerd"
    assert node.bound_store(limit=1) is None  # no store yet
    snapshot = node.images / "io.containerd.snapshotter.v1.overlayfs" / "snapshots" / "1" / "fs" / "layer"
    snapshot.parent.mkdir(parents=True)
    snapshot.write_bytes(b"x" * 3 * 1024 * 1024)
    assert 3 * 1024 * 1024 <= node.store_size() < 4 * 1024 * 1024
    assert node.bound_store(limit=4 * 1024 * 1024) is None and snapshot.exists()
    wiped = node.bound_store(limit=2 * 1024 * 1024)
    assert wiped is not None and wiped >= 3 * 1024 * 1024
    assert not node.images.exists() and node.store_size() == 0


def test_a_joining_node_keeps_the_system_and_session_images_only(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``add_real_node`` prunes each node once it is Ready, with the system images and the session's (``bring_up``
    sets them: Anchorage's pushed images and the store's); a node joined later (a test's third node) too."""
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(realnode.RealNode, "prepare", lambda self, plane, **_: calls.append(("prepare", self.name))
                        or tmp_path / "node.json")
    monkeypatch.setattr(realnode.RealNode, "start", lambda self, config: calls.append(("start", self.name)))
    monkeypatch.setattr(realnode.RealNode, "wait_ready", lambda self, plane, timeout: calls.append(("ready", self.name)))
    monkeypatch.setattr(realnode.RealNode, "prune_images", lambda self, keep: calls.append(("prune", sorted(keep))))
    plane: Any = SimpleNamespace(binaries=SimpleNamespace(), root=tmp_path)
    network: Any = SimpleNamespace(slot=SimpleNamespace(number=7))
    registry: Any = SimpleNamespace(address="10.200.7.1:5000")
    local = cluster.LocalCluster(plane, network=network, registry=registry,
                                 system_images={"pause": "r/anchorage/pause:1", "coredns": "r/anchorage/coredns:1"},
                                 session_images={"r/anchorage/operator:2", "r/anchorage/s3:3"})
    local.add_real_node("node-1")
    local.add_real_node("node-3")
    keep = ["r/anchorage/coredns:1", "r/anchorage/operator:2", "r/anchorage/pause:1", "r/anchorage/s3:3"]
    assert calls == [("prepare", "node-1"), ("start", "node-1"), ("ready", "node-1"), ("prune", keep),
                     ("prepare", "node-3"), ("start", "node-3"), ("ready", "node-3"), ("prune", keep)]
