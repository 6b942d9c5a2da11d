"""Build Anchorage's images without a Docker engine, and run each image's smoke command.

Called by ``make images`` and by ``tests/images/test_built_images.py`` (the CI step). The builder is Debian's
``buildah`` with ``--isolation chroot`` and ``vfs`` storage (no daemon, no overlay or FUSE needed), its
storage under ``<cache>/images/`` (``$ANCHORAGE_CACHE``, else ``~/.cache/anchorage``). No registry is needed:
the base is made with ``debootstrap`` from Debian's packages (minbase bookworm + python3, its venv module
and the CA certificates) and imported locally as ``localhost/anchorage/debian-base:<key>``; ``--base IMAGE``
builds on a registry image instead (the Dockerfiles' default, ``python:3.12.7-slim-bookworm``).

Images are cached by content: an image's tag is a hash of its Dockerfile (comments aside), every file its
``COPY`` lines read, the base image's id, the build arguments and :data:`RECIPE`, so a second run with
nothing changed builds nothing; the :data:`KEEP` newest builds of each image are kept, older ones removed.
``--format docker`` keeps the Dockerfiles' ``SHELL`` (OCI images have none).

Smoke commands (``--smoke``): the agent image's three CLIs print their pinned versions and its Python stack
imports, as the agent user (uid 65532, the Job's ``runAsUser``); the verifier image scores the smoke task's
expected result with every gate the laptop runs (same command on the host, same gates and verdicts); the
operator image's entry points (``anchorage operator``, ``anchorage gateway``, the pods' ``python -m
anchorage.runtime.kubepod``) start and its runtime dependencies import, as its user (uid 10004).

    python tools/images.py build agent-base verifier operator --smoke
    python tools/images.py base            # only the debootstrap base
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "operator"))

from anchorage.agents import cache_root  # noqa: E402  (after the path of a plain checkout)
from anchorage.agents.installing import load_pins  # noqa: E402

SUITE = "bookworm"
MIRROR = os.environ.get("ANCHORAGE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "passwd")
IMAGES = ("agent-base", "verifier", "operator", "tasks")
#: Images built on another of these images instead of the base (the task bundle adds tasks/ to the operator image).
BUILT_ON = {"tasks": "operator"}
BUILD_TIMEOUT_SEC = 7200
KEEP = 2  # builds kept per image (see prune)
YOUNG_SEC = 6 * 3600  # ... and every build younger than this
_DIRECTIVE = re.compile(r"#\s*(syntax|escape|check)\s*=", re.IGNORECASE)
#: How images are built; part of every image's content hash (a change here rebuilds them).
RECIPE = ("bud", "--isolation", "chroot", "--layers=false", "--format", "docker")


class BuildError(Exception):
    """A step failed; the message has the command and its output's tail."""


def storage() -> list[str]:
    root = cache_root() / "images"
    return ["--root", str(root / "storage"), "--runroot", str(root / "run"), "--storage-driver", "vfs"]


def run(argv: list[str], *, timeout: float = BUILD_TIMEOUT_SEC, quiet: bool = False, stream: bool = False) -> str:
    """Run a command; its stdout, or :class:`BuildError` with the command and the output's tail.

    ``stream``: the output goes on to this process's stdout line by line as well (long builds show progress)."""
    if not quiet:
        print("+", shlex.join(argv), flush=True)
    if not stream:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip()[-4000:]
            raise BuildError(f"{shlex.join(argv)} exited {done.returncode}:\n{tail}")
        return done.stdout
    lines: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line)
            del lines[:-200]
        code = proc.wait(timeout=timeout)
    if code != 0:
        raise BuildError(f"{shlex.join(argv)} exited {code}:\n{''.join(lines)[-4000:]}")
    return "".join(lines)


def buildah(*args: str, quiet: bool = False, timeout: float = BUILD_TIMEOUT_SEC, stream: bool = False) -> str:
    return run(["buildah", *storage(), *args], quiet=quiet, timeout=timeout, stream=stream)


def ensure_tools() -> None:
    """buildah and debootstrap, from Debian's packages when missing (as root)."""
    missing = [p for p in ("buildah", "debootstrap") if shutil.which(p) is None]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BuildError(f"{' '.join(missing)} missing: install them (apt-get install {' '.join(missing)})")
    run(["apt-get", "update", "-qq"])
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing])


def images() -> dict[str, str]:
    """Local images by ``name:tag`` → id."""
    out = buildah("images", "--json", quiet=True)
    found: dict[str, str] = {}
    for image in json.loads(out or "[]"):
        for name in image.get("names") or []:
            found[name] = image["id"]
    return found


def image_id(name: str) -> str | None:
    return images().get(name)


# ----- the base -----------------------------------------------------------------------------------------------

def base_tag() -> str:
    key = hashlib.sha256(json.dumps([SUITE, "minbase", BASE_PACKAGES, MIRROR]).encode()).hexdigest()[:12]
    return f"localhost/anchorage/debian-base:{SUITE}-{key}"


def build_base() -> str:
    """The debootstrap base, made and imported once (cached by its recipe)."""
    tag = base_tag()
    if image_id(tag) is not None:
        return tag
    work = cache_root() / "images"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work, prefix="rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        run(["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(rootfs), MIRROR],
            stream=True)
        container = buildah("from", "scratch", quiet=True).strip()
        try:
            mount = buildah("mount", container, quiet=True).strip()
            run(["cp", "-a", f"{rootfs}/.", mount], quiet=True)
            buildah("umount", container, quiet=True)
            buildah("config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "--env", "LANG=C.UTF-8", "--cmd", "bash",
                    "--label", f"org.anchorage.base=debootstrap {SUITE} minbase + {' '.join(BASE_PACKAGES)}", container)
            buildah("commit", "--rm", container, tag)
        except BaseException:
            subprocess.run(["buildah", *storage(), "rm", container], capture_output=True, check=False)
            raise
    return tag


# ----- the images ---------------------------------------------------------------------------------------------

def copied_sources(dockerfile: Path) -> list[Path]:
    """The files of the build context the Dockerfile's ``COPY`` lines read (directories expanded)."""
    files: list[Path] = []
    for line in dockerfile.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or parts[0] != "COPY":
            continue
        for source in [p for p in parts[1:-1] if not p.startswith("--")]:
            path = REPO / source
            files += sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts) \
                if path.is_dir() else [path]
    return files


def instructions(dockerfile: Path) -> str:
    """The Dockerfile without its comment lines (parser directives such as ``# syntax=`` kept): what the
    build reads, so a comment's edit does not rebuild an image."""
    kept = [line for line in dockerfile.read_text(encoding="utf-8").splitlines()
            if not line.lstrip().startswith("#") or _DIRECTIVE.match(line)]
    return "\n".join(kept)


def image_tag(name: str, base: str, args: dict[str, str]) -> str:
    """``localhost/anchorage/<name>:<hash>`` of everything the build reads (see the module docstring)."""
    dockerfile = REPO / "images" / name / "Dockerfile"
    digest = hashlib.sha256()
    digest.update((image_id(base) or base).encode() + json.dumps(RECIPE).encode())
    digest.update(json.dumps(sorted(args.items())).encode())
    digest.update(instructions(dockerfile).encode() + b"\0")
    for path in copied_sources(dockerfile):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"localhost/anchorage/{name}:{digest.hexdigest()[:12]}"


@contextlib.contextmanager
def build_trust() -> Iterator[list[str]]:
    """Mounts for the build's RUN steps only (never in the image): this machine's CA bundle, so downloads
    through a TLS-inspecting egress proxy verify as they do on the host, and a pip config that uses it."""
    bundle = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
    if not bundle.is_file():
        yield []
        return
    with tempfile.TemporaryDirectory(prefix="anchorage-build-") as folder:
        pip_conf = Path(folder) / "pip.conf"
        pip_conf.write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n", encoding="utf-8")
        yield ["-v", f"{bundle}:/etc/ssl/certs/ca-certificates.crt:ro", "-v", f"{pip_conf}:/etc/pip.conf:ro"]


def build(name: str, base: str, args: dict[str, str] | None = None) -> str:
    """Build ``images/<name>`` on ``base`` unless an image of the same content exists; its tag."""
    args = {"BASE_IMAGE": base, **(args or {})}
    tag = image_tag(name, base, args)
    if image_id(tag) is not None:
        print(f"{name}: cached as {tag}")
        return tag
    flags = [arg for key, value in sorted(args.items()) for arg in ("--build-arg", f"{key}={value}")]
    with build_trust() as mounts:
        buildah(*RECIPE, *flags, *mounts, "-f", f"images/{name}/Dockerfile", "-t", tag, str(REPO), stream=True)
    print(f"{name}: built {tag}")
    prune(name)
    return tag


def build_image(name: str, base: str, args: dict[str, str] | None = None, built: dict[str, str] | None = None) -> str:
    """:func:`build` of ``images/<name>``, on the image it is built on (:data:`BUILT_ON`, built first) or ``base``;
    each image's tag lands in ``built`` (by name), so one image is built once per call chain."""
    built = built if built is not None else {}
    if name not in built:
        under = BUILT_ON.get(name)
        if under is not None:
            build_image(under, base, args, built)
        built[name] = build(name, built[under] if under is not None else base, args)
    return built[name]


def prune(name: str, keep: int = KEEP, young_sec: float = YOUNG_SEC) -> list[str]:
    """Remove all but the ``keep`` newest builds of ``images/<name>`` (each content change leaves one behind,
    gigabytes in vfs storage) and any younger than ``young_sec`` (another build on this machine may be using it as
    the base of its next image right now); what was removed. Two are kept so a branch and main do not rebuild in
    turn."""
    out = buildah("images", "--json", quiet=True)
    prefix = f"localhost/anchorage/{name}:"
    built = sorted(((_created(image), tag) for image in json.loads(out or "[]")
                    for tag in image.get("names") or [] if tag.startswith(prefix)), reverse=True)
    removed = []
    old = [(created, tag) for created, tag in built[keep:] if time.time() - created > young_sec]
    for _, tag in old:  # one a working container still uses stays (buildah refuses; no harm)
        if subprocess.run(["buildah", *storage(), "rmi", tag], capture_output=True, check=False).returncode == 0:
            removed.append(tag)
    return removed


def _created(image: dict[str, object]) -> float:
    """When buildah made an image (its ``created`` Unix time, or its ISO ``createdatraw``), 0 when unknown."""
    created = image.get("created")
    if isinstance(created, (int, float)):
        return float(created)
    text = str(image.get("createdatraw") or "")
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00").split(".")[0]).timestamp()
    except ValueError:
        return 0.0


# ----- smoke commands -----------------------------------------------------------------------------------------

@contextlib.contextmanager
def container(tag: str) -> Iterator[str]:
    ident = buildah("from", "--pull-never", tag, quiet=True).strip()
    try:
        yield ident
    finally:
        subprocess.run(["buildah", *storage(), "rm", ident], capture_output=True, check=False)


def in_image(ident: str, *command: str, user: str | None = None) -> str:
    who = ["--user", user] if user else []
    return buildah("run", "--isolation", "chroot", *who, ident, "--", *command, quiet=True)


def smoke_agent(tag: str) -> dict[str, str]:
    """Each pinned CLI's ``--version`` as the agent user, and the Python stack's imports; what they printed."""
    printed: dict[str, str] = {}
    with container(tag) as ident:
        for name, pin in load_pins().items():
            out = in_image(ident, pin.command, "--version", user="65532:65532").strip()
            if pin.version not in out:
                raise BuildError(f"{pin.command} --version in {tag} printed {out!r}, not {pin.version}")
            printed[name] = out.splitlines()[-1]
        stack = "import numpy, pandas, scipy, sklearn, matplotlib, openpyxl, xlrd; print(numpy.__version__)"
        printed["python"] = in_image(ident, "python", "-c", stack, user="65532:65532").strip()
        printed["user"] = in_image(ident, "sh", "-c", "id -u; echo $HOME", user="65532:65532").split()[0]
    return printed


def smoke_verifier(tag: str, task: str = "smoke-inventory") -> dict[str, object]:
    """The verifier image scores the task's expected result (the same command on the host must agree) and its
    entry point prints its help."""
    source = REPO / "tasks" / task
    command = ["score", "--task", "/tmp/task", "/tmp/task/tests/expected_result.json", "--json", "--lean"]
    with container(tag) as ident:
        buildah("copy", ident, str(source), "/tmp/task", quiet=True)
        inside = json.loads(in_image(ident, "anchorage", *command))
        usage = in_image(ident, "anchorage", "score", "--help")  # the entry point's help prints, too
        if "--task" not in usage:
            raise BuildError(f"anchorage score --help in {tag} printed no --task option:\n{usage[-2000:]}")
    host = json.loads(run([str(Path(sys.executable).parent / "anchorage"), *[
        str(source) if part == "/tmp/task" else str(source / "tests" / "expected_result.json")
        if part.startswith("/tmp/task/") else part for part in command]], quiet=True))
    verdicts = [(g["name"], g["status"], g.get("severity")) for g in inside["gates"]]
    if inside["o_eval"] != 1.0 or not inside["gradable"]:
        raise BuildError(f"the verifier image scored {task}'s expected result O-Eval {inside['o_eval']}")
    if verdicts != [(g["name"], g["status"], g.get("severity")) for g in host["gates"]]:
        raise BuildError(f"the verifier image's gates differ from the host's: {verdicts}")
    if inside["obligations"].get("total") != host["obligations"].get("total"):
        raise BuildError("the verifier image checked another number of obligations than the host")
    return {"o_eval": inside["o_eval"], "gates": len(verdicts), "obligations": inside["obligations"].get("total")}


#: What the operator image's processes import beyond the scorer's stack (kopf and its API client, the store's S3
#: client, the admin and viewer web servers, the gateway's HTTP parser and event loop, the metrics).
OPERATOR_IMPORTS = ("kopf", "kubernetes", "boto3", "aiohttp", "httptools", "uvloop", "prometheus_client")


def smoke_operator(tag: str) -> dict[str, object]:
    """The operator image's entry points answer ``--help`` and its runtime dependencies import, as uid 10004."""
    user = "10004:10004"
    found: dict[str, object] = {}
    with container(tag) as ident:
        for name, command in (("operator", ["anchorage", "operator", "--help"]),
                              ("gateway", ["anchorage", "gateway", "--help"]),
                              ("kubepod", ["python", "-m", "anchorage.runtime.kubepod", "--help"])):
            out = in_image(ident, *command, user=user)
            if "usage" not in out.lower():
                raise BuildError(f"{' '.join(command)} in {tag} printed no usage: {out[-400:]!r}")
            found[name] = True
        script = f"import importlib, json; print(json.dumps({{m: importlib.import_module(m).__name__ " \
                 f"for m in {list(OPERATOR_IMPORTS)!r}}}))"
        found["imports"] = sorted(json.loads(in_image(ident, "python", "-c", script, user=user)))
        found["user"] = in_image(ident, "id", "-u", user=user).strip()
        found["prices"] = in_image(ident, "sh", "-c", "ls \"$ANCHORAGE_PRICES\" | head -1", user=user).strip()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("base", help="make and import the debootstrap base")
    build_cmd = sub.add_parser("build", help="build images (cached by content)")
    build_cmd.add_argument("names", nargs="*", default=list(IMAGES), help=f"of {', '.join(IMAGES)}")
    build_cmd.add_argument("--base", help="base image from a registry instead of the debootstrap base")
    build_cmd.add_argument("--smoke", action="store_true", help="run each image's smoke command after building")
    build_cmd.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE")
    build_cmd.add_argument("--json", action="store_true", help="end with one line: the built tags by name (JSON)")
    args = parser.parse_args(argv)
    try:
        ensure_tools()
        base = build_base() if args.command == "base" or not getattr(args, "base", None) else args.base
        print(f"base: {base}")
        if args.command == "base":
            return 0
        extra = dict(item.split("=", 1) for item in args.build_arg)
        built: dict[str, str] = {}
        for name in args.names:
            tag = build_image(name, base, extra, built)
            if args.smoke:
                smokes = {"agent-base": smoke_agent, "verifier": smoke_verifier, "operator": smoke_operator}
                smoke = smokes[name](tag) if name in smokes else {}
                print(f"{name}: smoke ok {json.dumps(smoke)}")
        if args.json:
            print(json.dumps({name: built[name] for name in args.names}))
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
