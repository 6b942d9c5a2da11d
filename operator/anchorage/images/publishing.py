"""Publish Anchorage's images to a registry (``anchorage images push --registry R``).

Each image built here (:mod:`.building`, cached by content) goes to ``R/anchorage/<name>:<tag>`` with ``buildah
push`` — the tag by default the chart's ``appVersion``, which the chart's values pull when only
``global.imageRegistry=R`` is set — and the digest the registry now holds is read back from buildah's
``--digestfile``, so values can pin every image by digest (:func:`chart_values`). Layers are gzip-compressed by
default (what a remote registry should store); ``compress=False`` pushes them as they are (a registry on the same
machine or network: no CPU spent on gzip). ``tls_verify=False`` is for plain-HTTP or self-signed registries, as
buildah has it; credentials come from an auth file (``buildah login`` writes
``${XDG_RUNTIME_DIR}/containers/auth.json``, which buildah reads by default; ``authfile`` names another, e.g. a
Docker ``config.json``).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorage.images.building import buildah

#: Where the images go under a registry: ``<registry>/anchorage/<name>`` (the chart's default repositories are
#: ``ghcr.io/anchorage/<name>``; ``global.imageRegistry`` replaces their registry part).
NAMESPACE = "anchorage"
#: The images a cluster needs, by folder under images/ (the lean image is for the Lean layer's own builds).
PUBLISHED = ("agent-base", "verifier", "operator", "tasks")


@dataclass(frozen=True)
class Pushed:
    """One image in a registry: where it is and its digest (``sha256:...``)."""

    name: str
    repository: str
    tag: str
    digest: str

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def pinned(self) -> str:
        return f"{self.repository}@{self.digest}"


def repository(registry: str, name: str) -> str:
    """``<registry>/anchorage/<name>`` (``registry`` may carry a path: ``registry.example.com/team``)."""
    return f"{registry.rstrip('/')}/{NAMESPACE}/{name}"


def push(name: str, local: str, registry: str, tag: str, *, tls_verify: bool = True, authfile: Path | None = None,
         compress: bool = True) -> Pushed:
    """Push the local image ``local`` to ``<registry>/anchorage/<name>:<tag>``; where it landed, with its digest."""
    target = repository(registry, name)
    flags = [f"--tls-verify={'true' if tls_verify else 'false'}"]
    if authfile is not None:
        flags += ["--authfile", str(authfile)]
    if not compress:
        flags.append("--disable-compression")
    with tempfile.TemporaryDirectory(prefix="anchorage-push-") as folder:
        digestfile = Path(folder) / "digest"
        buildah("push", *flags, "--digestfile", str(digestfile), local, f"docker://{target}:{tag}", stream=True)
        digest = digestfile.read_text(encoding="utf-8").strip()
    return Pushed(name, target, tag, digest)


def chart_values(pushed: dict[str, Pushed]) -> dict[str, Any]:
    """The chart's values that pull exactly these images (repository, tag and digest of each; a digest wins over the
    tag): ``image`` (operator, gateway, the pods' fetch and upload containers), ``tasks.image`` (the task bundle),
    ``operator.agentImage`` and ``operator.verifierImage``."""

    def block(name: str) -> dict[str, str]:
        image = pushed[name]
        return {"repository": image.repository, "tag": image.tag, "digest": image.digest}

    values: dict[str, Any] = {}
    if "operator" in pushed:
        values["image"] = block("operator")
    if "tasks" in pushed:
        values["tasks"] = {"image": block("tasks")}
    operator = {key: block(name) for key, name in (("agentImage", "agent-base"), ("verifierImage", "verifier"))
                if name in pushed}
    if operator:
        values["operator"] = operator
    return values
