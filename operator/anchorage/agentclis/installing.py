"""Install the pinned agent CLIs from npm into versioned folders (standard library only).

Called by ``anchorage agents install`` (folders under ``<cache>/agents``, see :mod:`anchorage.agentclis`)
and, as a script, by the agent image's build (``python3 installing.py --root /opt/anchorage/agents
codex claude-code opencode``), so a laptop and the image install the same versions the same way. The
versions are in ``versions.json`` beside this file — the only place they are written.

Each CLI gets its own folder ``<root>/<cli>@<version>`` holding an npm global prefix (``bin/<command>``,
``lib/node_modules/...``) and the marker ``.anchorage-agent.json``. An install is built in a temporary
folder beside it, checked (``<command> --version`` must print the pinned version) and renamed into
place, so a folder that exists is complete; a second install of the same version does nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

VERSIONS_FILE = Path(__file__).resolve().with_name("versions.json")
MARKER = ".anchorage-agent.json"
NPM_TIMEOUT_SEC = 1800
VERSION_TIMEOUT_SEC = 120


class InstallError(Exception):
    """An install failed; the message says what and how to fix it."""


@dataclass(frozen=True)
class Pin:
    """One pinned CLI: its name (the agent kind), npm package, version and the command it installs."""

    name: str
    package: str
    version: str
    command: str

    @property
    def folder_name(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"


def load_pins(path: Path = VERSIONS_FILE) -> dict[str, Pin]:
    """The pinned CLIs by name, in the file's order."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return {name: Pin(name, str(entry["package"]), str(entry["version"]), str(entry["command"]))
            for name, entry in data.items() if not name.startswith("_")}


def folder(root: Path, pin: Pin) -> Path:
    return root / pin.folder_name


def read_marker(root: Path, pin: Pin) -> dict[str, object] | None:
    """The install record of ``pin`` under ``root`` when the folder is a complete install of it."""
    home = folder(root, pin)
    try:
        record = json.loads((home / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("version") != pin.version:
        return None
    if not os.access(home / "bin" / pin.command, os.X_OK):
        return None
    return record


def install(root: Path, pin: Pin, *, npm: str = "npm", say: object = print) -> tuple[Path, bool]:
    """Install ``pin`` under ``root``; returns (folder, whether anything was done)."""
    target = folder(root, pin)
    if read_marker(root, pin) is not None:
        return target, False
    npm_path = shutil.which(npm)
    if npm_path is None:
        raise InstallError(f"npm is not on PATH, so {pin.spec} cannot be installed "
                           "(install Node.js and npm: apt-get install nodejs npm)")
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{pin.folder_name}.", dir=root))
    try:
        _say(say, f"installing {pin.spec} into {target} ...")
        _npm_install(npm_path, staging, pin)
        printed = _check_version(staging, pin)
        record = {"name": pin.name, "package": pin.package, "version": pin.version, "command": pin.command,
                  "version_output": printed, "installed_at": datetime.datetime.now(datetime.UTC).isoformat(),
                  "npm": _npm_version(npm_path)}
        (staging / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.chmod(staging, 0o755)
        if target.exists():
            shutil.rmtree(target)  # an incomplete folder (no valid marker) from an older layout
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target, True


def link_bin(root: Path, pin: Pin) -> Path:
    """``<root>/bin/<command>`` → the installed command (a stable PATH entry for an image's shell users)."""
    link = root / "bin" / pin.command
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path("..") / pin.folder_name / "bin" / pin.command)
    return link


def _say(say: object, text: str) -> None:
    if callable(say):
        say(text)


def _npm_install(npm: str, prefix: Path, pin: Pin) -> None:
    command = [npm, "install", "--global", "--prefix", str(prefix), "--no-audit", "--no-fund",
               "--no-update-notifier", "--loglevel=error", pin.spec]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NPM_TIMEOUT_SEC, check=False)
    except subprocess.TimeoutExpired as exc:
        raise InstallError(f"npm install {pin.spec} did not finish in {NPM_TIMEOUT_SEC} s") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-1500:]
        raise InstallError(f"npm install {pin.spec} failed (exit {done.returncode}):\n{tail}\n"
                           "check that the npm registry is reachable (npm config get registry)")


def _check_version(prefix: Path, pin: Pin) -> str:
    program = prefix / "bin" / pin.command
    if not os.access(program, os.X_OK):
        raise InstallError(f"{pin.spec} installed no executable bin/{pin.command} under {prefix}")
    with tempfile.TemporaryDirectory(prefix="anchorage-agent-home-") as home:
        env = {**os.environ, "HOME": home, "CI": "1"}
        try:
            done = subprocess.run([str(program), "--version"], capture_output=True, text=True, env=env,
                                  stdin=subprocess.DEVNULL, timeout=VERSION_TIMEOUT_SEC, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InstallError(f"{pin.command} --version did not run: {exc}") from exc
    printed = (done.stdout or done.stderr).strip()
    if done.returncode != 0 or pin.version not in printed:
        raise InstallError(f"{pin.command} --version printed {printed[-300:]!r} (exit {done.returncode}); "
                           f"expected the pinned version {pin.version}")
    return printed.splitlines()[-1] if printed else printed


def _npm_version(npm: str) -> str:
    try:
        done = subprocess.run([npm, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    """Script entry point (the agent image's build): install the named CLIs (default: all)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, required=True, help="folder of the <cli>@<version> folders")
    parser.add_argument("--versions", type=Path, default=VERSIONS_FILE, help="the pinned versions (JSON)")
    parser.add_argument("--npm", default="npm")
    parser.add_argument("--link-bin", action="store_true",
                        help="also link each command into <root>/bin (the agent image's PATH entry)")
    parser.add_argument("names", nargs="*", help="CLIs to install (default: all pinned)")
    args = parser.parse_args(argv)
    pins = load_pins(args.versions)
    unknown = [n for n in args.names if n not in pins]
    if unknown:
        print(f"unknown agent CLI(s) {', '.join(unknown)}; pinned: {', '.join(pins)}", file=sys.stderr)
        return 2
    try:
        for name in args.names or list(pins):
            path, done = install(args.root, pins[name], npm=args.npm)
            print(f"{pins[name].spec}: {'installed' if done else 'already installed'} in {path}")
            if args.link_bin:
                link_bin(args.root, pins[name])
    except InstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
