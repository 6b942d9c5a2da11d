"""The CI step of the images: build the agent and verifier images here — no Docker engine: buildah with
``--isolation chroot`` and vfs storage on a debootstrap base, all from Debian's and the language registries'
packages — and run each image's smoke command (``anchorage.images``). Built images are cached by content
under ``$ANCHORAGE_CACHE/images``: the first run takes tens of minutes, a run with nothing changed seconds.
"""

from __future__ import annotations

import time
from types import ModuleType

import pytest

import imagetool
from anchorage import agentclis
from anchorage.images import smoke

pytestmark = pytest.mark.timeout(10800)


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return imagetool.ready()


@pytest.fixture(scope="module")
def base(tool: ModuleType) -> str:
    tag: str = tool.build_base()
    return tag


@pytest.mark.slow  # runs each pinned agent CLI in the image under the agent's user (node starts): ~35 s on a busy machine
def test_agent_image_has_the_pinned_clis_for_the_agent_user(tool: ModuleType, base: str) -> None:
    tag = tool.build("agent-base", base)
    printed = smoke.smoke_agent(tag)
    for name, pin in agentclis.pins().items():
        assert pin.version in printed[name]
    assert printed["python"] == "2.0.2"  # SPEC §1's numpy pin, importable with the rest of the stack
    assert printed["user"] == "65532"    # the Job's runAsUser
    assert tool.build("agent-base", base) == tag  # cached by content: nothing rebuilt


@pytest.mark.slow  # scores the smoke task in the verifier image (its Python and the gates start): 23-49 s under load
def test_verifier_image_scores_the_smoke_task_with_the_hosts_gates(tool: ModuleType, base: str) -> None:
    tag = tool.build("verifier", base)
    result = smoke.smoke_verifier(tag)
    assert result["o_eval"] == 1.0 and result["gates"] > 0
    builds = tool.builds("verifier")
    assert tag in [built for _, built in builds]
    # older builds pruned: beyond the newest KEEP only those young enough that another build may still use them
    assert all(time.time() - created <= tool.YOUNG_SEC or built == tag for created, built in builds[tool.KEEP:]), builds


@pytest.mark.slow  # starts the operator image's programs (operator, gateway, pod programs) one by one: ~35 s
def test_operator_image_runs_its_entry_points_as_its_user(tool: ModuleType, base: str) -> None:
    tag = tool.build("operator", base)
    result = smoke.smoke_operator(tag)
    assert result["operator"] and result["gateway"] and result["kube.pod"]
    assert result["imports"] == sorted(smoke.OPERATOR_IMPORTS)
    assert result["agent_stack"] == []  # the agents' and reproductions' stack stays out of the operator image
    assert result["user"] == "10004"  # the chart's podSecurityContext.runAsUser
    assert result["prices"], "ANCHORAGE_PRICES is empty in the image"
