"""``buildah run`` lost a command's output now and then on a loaded machine: the smoke asks again, and says so when a
command printed nothing at all (never an empty answer read as the command's)."""

from __future__ import annotations

import pytest

from anchorage.images import smoke
from anchorage.images.building import BuildError


def test_an_empty_answer_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = ["", "65532\n/home/agent\n"]
    calls: list[tuple[str, ...]] = []

    def buildah(*args: str, quiet: bool = False) -> str:
        calls.append(args)
        return answers.pop(0)

    monkeypatch.setattr(smoke, "buildah", buildah)
    assert smoke.in_image("ctr", "sh", "-c", "id -u", user="65532:65532") == "65532\n/home/agent\n"
    assert len(calls) == 2 and calls[0] == ("run", "--isolation", "chroot", "--user", "65532:65532", "ctr", "--",
                                            "sh", "-c", "id -u")


def test_a_command_that_never_prints_is_a_build_error(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(smoke, "buildah", lambda *args, quiet=False: calls.append(args) or "  \n")
    with pytest.raises(BuildError, match=r"'id -u' printed nothing in 3 runs"):
        smoke.in_image("ctr", "id", "-u")
    assert len(calls) == smoke.ATTEMPTS
