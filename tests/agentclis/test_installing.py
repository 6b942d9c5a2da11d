"""``anchorage agents install|list``: pinned versions from one file, versioned folders, all-or-nothing installs.

npm itself is replaced here by a small script that lays out what ``npm install --global --prefix`` lays out
(the real npm installs the real CLIs in ``test_real_agents.py``); what is tested is the installer's own
behaviour: what it checks, what it leaves behind when npm or the CLI misbehaves, what it skips.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchorage import agentclis
from anchorage.agentclis.installing import MARKER, InstallError, Pin, install, load_pins, main, read_marker
from anchorage.cli import app

PIN = Pin("toy", "@example/toy-cli", "1.2.3", "toy")

# A stand-in for npm: `npm install --global --prefix DIR PKG@VER` creates DIR/bin/<cmd> printing a version
# ($FAKE_PRINTS, default the requested one), or fails with $FAKE_FAIL; every call is appended to $FAKE_LOG.
FAKE_NPM = r"""#!/bin/sh
echo "$*" >> "$FAKE_LOG"
[ "$1" = "--version" ] && { echo 10.0.0; exit 0; }
[ -n "$FAKE_FAIL" ] && { echo "npm ERR! $FAKE_FAIL" >&2; exit 1; }
while [ "$1" != "--prefix" ]; do shift; done
prefix=$2; spec=$(eval echo \${$#}); version=${spec##*@}
mkdir -p "$prefix/bin" "$prefix/lib/node_modules/toy"
printf '#!/bin/sh\necho "toy %s"\n' "${FAKE_PRINTS:-$version}" > "$prefix/lib/node_modules/toy/cli"
chmod +x "$prefix/lib/node_modules/toy/cli"
ln -s ../lib/node_modules/toy/cli "$prefix/bin/toy"
"""


@pytest.fixture()
def npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    program = tmp_path / "fake-npm"
    program.write_text(FAKE_NPM)
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "npm.log"))
    return program


def calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "npm.log"
    return [line for line in log.read_text().splitlines() if "install" in line] if log.exists() else []


def test_install_builds_a_versioned_folder_and_skips_it_next_time(tmp_path: Path, npm: Path) -> None:
    root = tmp_path / "agents"
    folder, done = install(root, PIN, npm=str(npm), say=None)
    assert done and folder == root / "toy@1.2.3"
    assert os.access(folder / "bin" / "toy", os.X_OK)
    record = read_marker(root, PIN)
    assert record is not None and record["version"] == "1.2.3" and record["version_output"] == "toy 1.2.3"
    assert calls(tmp_path) == [f"install --global --prefix {next(iter(calls_prefix(tmp_path)))} --no-audit --no-fund "
                               "--no-update-notifier --loglevel=error @example/toy-cli@1.2.3"]
    assert install(root, PIN, npm=str(npm), say=None) == (folder, False)
    assert len(calls(tmp_path)) == 1  # nothing fetched again
    assert [p.name for p in root.iterdir()] == ["toy@1.2.3"]  # no staging folder left


def calls_prefix(tmp_path: Path) -> list[str]:
    return [line.split("--prefix ")[1].split()[0] for line in calls(tmp_path)]


def test_a_failed_npm_leaves_nothing_behind(tmp_path: Path, npm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FAIL", "404 Not Found - GET https://registry.npmjs.org/@example%2ftoy-cli")
    with pytest.raises(InstallError, match=r"(?s)npm install @example/toy-cli@1.2.3 failed.*404 Not Found"):
        install(tmp_path / "agents", PIN, npm=str(npm), say=None)
    assert list((tmp_path / "agents").iterdir()) == []


def test_a_cli_that_prints_another_version_is_refused(tmp_path: Path, npm: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_PRINTS", "9.9.9")
    with pytest.raises(InstallError, match=r"(?s)printed .toy 9.9.9.*expected the pinned version 1.2.3"):
        install(tmp_path / "agents", PIN, npm=str(npm), say=None)
    assert list((tmp_path / "agents").iterdir()) == []
    assert read_marker(tmp_path / "agents", PIN) is None


def test_a_folder_without_its_marker_is_not_an_install(tmp_path: Path, npm: Path) -> None:
    root = tmp_path / "agents"
    (root / "toy@1.2.3" / "bin").mkdir(parents=True)  # e.g. a copy interrupted half-way
    assert read_marker(root, PIN) is None
    folder, done = install(root, PIN, npm=str(npm), say=None)
    assert done and read_marker(root, PIN) is not None and (folder / MARKER).is_file()


def test_missing_npm_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match=r"npm is not on PATH.*apt-get install nodejs npm"):
        install(tmp_path, PIN, npm="no-such-npm-here", say=None)


def test_one_versions_file_for_the_installer_and_the_image() -> None:
    pins = load_pins()
    assert list(pins) == ["codex", "claude-code", "opencode"]
    assert {p.command for p in pins.values()} == {"codex", "claude", "opencode"}
    dockerfile = (Path(__file__).resolve().parents[2] / "images" / "agent-base" / "Dockerfile").read_text()
    assert "operator/anchorage/agentclis/versions.json" in dockerfile and "installing.py" in dockerfile
    assert not any(p.version in dockerfile for p in pins.values())  # no second copy of a version


def test_script_entry_point_installs_named_clis(tmp_path: Path, npm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    versions = tmp_path / "versions.json"
    versions.write_text(json.dumps({"toy": {"package": PIN.package, "version": PIN.version, "command": "toy"}}))
    assert main(["--root", str(tmp_path / "opt"), "--versions", str(versions), "--npm", str(npm), "toy"]) == 0
    assert "installed in" in capsys.readouterr().out
    assert main(["--root", str(tmp_path / "opt"), "--versions", str(versions), "nope"]) == 2


def test_cli_install_refuses_unknown_names_and_list_shows_the_install_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", "from anchorage.cli import main; main()", "agents", "install",
                           "gemini"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown agent CLI 'gemini'" in proc.stderr and "codex, claude-code" in proc.stderr
    listing = CliRunner().invoke(app, ["agents", "list"])
    assert listing.exit_code == 0
    for name, pin in agentclis.pins().items():
        assert f"anchorage agents install {name}" in listing.output and pin.version in listing.output


def test_cache_root_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANCHORAGE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert agentclis.tools_root() == tmp_path / "xdg" / "anchorage" / "agents"
    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path / "c"))
    assert agentclis.tools_root() == tmp_path / "c" / "agents"
    assert agentclis.bin_dir("codex") == f"/opt/anchorage/agents/codex@{agentclis.pins()['codex'].version}/bin"
    message = agentclis.missing("codex")
    assert message is not None and "anchorage agents install codex" in message


def test_cli_install_json_says_what_is_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorage.agentclis.installing import MARKER, folder

    monkeypatch.setenv("ANCHORAGE_CACHE", str(tmp_path / "cache"))
    root = agentclis.tools_root()
    for pin in agentclis.pins().values():   # complete installs already there: nothing runs npm
        home = folder(root, pin)
        (home / "bin").mkdir(parents=True)
        (home / "bin" / pin.command).write_text("#!/bin/sh\n")
        (home / "bin" / pin.command).chmod(0o755)
        (home / MARKER).write_text(json.dumps({"version": pin.version}))
    result = CliRunner().invoke(app, ["agents", "install", "all", "--json"])
    assert result.exit_code == 0, result.output
    shape = json.loads(result.stdout)
    assert set(shape) == set(agentclis.pins())
    for name, pin in agentclis.pins().items():
        assert shape[name] == {"spec": pin.spec, "path": str(folder(root, pin)), "installed_now": False}
