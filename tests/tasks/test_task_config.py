"""The task.toml model: Harbor schema 1.3 and 1.4, deprecated spellings, and loading a task directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from anchorage.errors import InputError
from anchorage.tasks import load_task, resolve_task, strip_canary
from anchorage.tasks.loading import read_task_config
from anchorage.tasks.taskconfig import TaskConfig, size_to_mb

SCHEMA_14 = """
schema_version = "1.4"
artifacts = [{source = "/root/results/demo_result.json"}, "/root/results/plot.png"]
[task]
name = "me/demo"
keywords = ["x"]
[[task.authors]]
name = "A"
[verifier]
timeout_sec = 60
network_mode = "no-network"
[agent]
timeout_sec = 100
network_mode = "allowlist"
allowed_hosts = ["gateway.local"]
[environment]
cpus = 4
memory_mb = 4096
network_mode = "allowlist"
allowed_hosts = ["gateway.local"]
docker_image = "python:3.12-slim"
"""


def write(tmp_path: Path, text: str, name: str = "demo", instruction: str | None = "Do it.\n") -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / "task.toml").write_text(text, encoding="utf-8")
    if instruction is not None:
        (root / "instruction.md").write_text(instruction, encoding="utf-8")
    return root


def test_reference_tasks_load(reference_dir: Path) -> None:
    roots = sorted((reference_dir / "tasks").iterdir())
    assert len(roots) == 18
    for root in roots:
        task = load_task(root)
        assert task.slug == root.name
        assert task.artifact_path == f"/root/results/{root.name}_result.json"
        assert task.config.schema_version == "1.3"
        assert task.config.environment.network_mode == "no-network"   # from allow_internet = false
        assert (task.config.environment.cpus, task.config.environment.memory_mb) == (2, 8192)
        assert task.config.verifier.timeout_sec == 180.0 and task.config.agent.timeout_sec == 14400.0
        assert not task.instruction.startswith("<!--") and "harbor-canary" not in task.instruction[:200]
        assert task.score_config_path.is_file() and task.expected_result_path.is_file()
        assert task.data_dir.is_dir()


def test_schema_14(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, SCHEMA_14))
    config = task.config
    assert config.artifact_paths == ["/root/results/demo_result.json", "/root/results/plot.png"]
    assert task.artifact_name == "demo_result.json"
    assert config.agent.network_mode == "allowlist" and config.agent.allowed_hosts == ["gateway.local"]
    assert (config.environment.cpus, config.environment.memory_mb, config.environment.storage_mb) == (4, 4096, 20480)
    assert config.environment.docker_image == "python:3.12-slim"
    assert config.deprecations == [] and config.unknown_keys == []
    assert task.name == "me/demo"


@pytest.mark.parametrize(
    ("env", "memory", "storage", "network"),
    [('memory = "4G"\nstorage = "10G"\nallow_internet = true', 4096, 10240, "public"),
     ('memory = "512M"\nallow_internet = false', 512, 20480, "no-network"),
     ('memory = "1.5Gi"', 1536, 20480, "no-network"),
     ("memory = 2048", 2048, 20480, "no-network")],
)
def test_deprecated_spellings(tmp_path: Path, env: str, memory: int, storage: int, network: str) -> None:
    config = read_task_config(write(tmp_path, f'version = "1.0"\n[environment]\n{env}\n') / "task.toml")
    assert config.schema_version == "1.0"
    assert (config.environment.memory_mb, config.environment.storage_mb) == (memory, storage)
    assert config.environment.network_mode == network
    assert any("`version`" in note for note in config.deprecations)
    assert all("deprecated" in note for note in config.deprecations)


def test_unknown_keys_are_kept_and_listed(tmp_path: Path) -> None:
    config = read_task_config(write(tmp_path, 'surprise = 1\n[environment]\nturbo = true\n') / "task.toml")
    assert config.unknown_keys == ["environment.turbo", "surprise"]
    assert config.model_extra == {"surprise": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [('schema_version = "9.9"', "unsupported task schema_version"), ("[environment\ncpus = 2", "not valid TOML"),
     ("[environment]\ncpus = -1", "environment.cpus"), ('[environment]\nmemory = "lots"', "cannot read size"),
     ('[agent]\nnetwork_mode = "wide-open"', "agent.network_mode")],
)
def test_bad_task_toml(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        load_task(write(tmp_path, text))
    assert info.value.hint


def test_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_task(tmp_path / "absent")
    with pytest.raises(InputError, match=r"task\.toml is missing"):
        load_task(tmp_path)
    with pytest.raises(InputError, match=r"instruction\.md is missing"):
        load_task(write(tmp_path, "", instruction=None))


@pytest.mark.parametrize(
    ("text", "stripped"),
    [("<!-- harbor-canary GUID 26b5 -->\n\n# Title\n", "# Title\n"),
     ("\ufeff<!--harbor-canary x-->\r\n# T", "# T"),
     ("# Title\n<!-- harbor-canary GUID -->\n", "# Title\n<!-- harbor-canary GUID -->\n"),
     ("<!-- another comment -->\n# T", "<!-- another comment -->\n# T")],
)
def test_strip_canary(text: str, stripped: str) -> None:
    assert strip_canary(text) == stripped


def test_size_to_mb_rejects_booleans() -> None:
    with pytest.raises(ValueError):
        size_to_mb(True)
    assert size_to_mb("2T") == 2 * 1024 * 1024


def test_resolve_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write(tmp_path, SCHEMA_14, name="my-task")
    assert resolve_task(root) == root.resolve()
    monkeypatch.setenv("ANCHORAGE_TASKS", str(tmp_path))
    assert resolve_task("my-task") == root.resolve()
    assert resolve_task("someone/my-task") == root.resolve()
    with pytest.raises(InputError, match="no task named 'nothing-here'") as info:
        resolve_task("nothing-here")
    assert "ANCHORAGE_TASKS" in (info.value.hint or "")


def test_config_model_defaults() -> None:
    config = TaskConfig.model_validate({})
    assert config.schema_version == "1.3" and config.environment.network_mode == "no-network"
    assert config.environment.gpus == 0 and config.environment.storage_mb == 20480
