"""Build Anchorage's images without a Docker engine (``anchorage images build``, ``make images``).

The builder is Debian's ``buildah`` with ``--isolation chroot`` and ``vfs`` storage (no daemon, no overlay or FUSE
needed), its storage under ``<cache>/images/`` (``$ANCHORAGE_CACHE``, else ``~/.cache/anchorage``). No registry is
needed: the base is made with ``debootstrap`` from Debian's packages (minbase bookworm + python3, its venv module and
the CA certificates) and imported locally as ``localhost/anchorage/debian-base:<key>``; ``--base IMAGE`` builds on a
registry image instead (the Dockerfiles' default, ``python:3.12.7-slim-bookworm``). The build context is a checkout
of the repository (:mod:`anchorage.images.checkout`).

Images are cached by content: an image's tag is a hash of its Dockerfile (comments aside), every file its
``COPY`` lines read, the base image's id, the build arguments and :data:`RECIPE`, so a second run with
nothing changed builds nothing; the :data:`KEEP` newest builds of each image and any younger than :data:`YOUNG_SEC`
are kept, older ones removed.
``--format docker`` keeps the Dockerfiles' ``SHELL`` (OCI images have none). Smoke commands: :mod:`.smoke`;
publishing to a registry: :mod:`.publishing`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from anchorage.agentclis import cache_root
from anchorage.errors import InfrastructureError
from anchorage.images import checkout

SUITE = "bookworm"
MIRROR = os.environ.get("ANCHORAGE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "passwd")
IMAGES = ("agent-base", "verifier", "operator", "tasks")
#: Images built on another image instead of the base: the task bundle adds tasks/ to the operator image, and the
#: operator and verifier images add the Anchorage package to an image of their locked dependencies alone, so a
#: change to the package's code does not install every wheel again.
BUILT_ON = {"tasks": "operator", "operator": "operator-deps", "verifier": "verifier-deps"}
#: Images built from another folder's Dockerfile with fixed build arguments: (folder under ``images/``, arguments).
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "operator-deps": ("deps", {"LOCK": "operator"}), "verifier-deps": ("deps", {"LOCK": "verifier"})}
BUILD_TIMEOUT_SEC = 7200
KEEP = 2  # builds kept per image (see prune)
YOUNG_SEC = 6 * 3600  # ... and every build younger than this
_DIRECTIVE = re.compile(r"#\s*(syntax|escape|check)\s*=", re.IGNORECASE)
#: How images are built; part of every image's content hash (a change here rebuilds them).
RECIPE = ("bud", "--isolation", "chroot", "--layers=false", "--format", "docker")


class BuildError(InfrastructureError):
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

def copied_sources(dockerfile: Path, context: Path, args: dict[str, str] | None = None) -> list[Path]:
    """The files of the build context the Dockerfile's ``COPY`` lines read (directories expanded), ``${ARG}`` in a
    source replaced by the build argument ``args`` gives it."""
    files: list[Path] = []
    for line in dockerfile.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or parts[0] != "COPY":
            continue
        for source in [p for p in parts[1:-1] if not p.startswith("--")]:
            source = re.sub(r"\$\{(\w+)\}", lambda m: (args or {}).get(m.group(1), m.group(0)), source)
            path = context / source
            files += sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts) \
                if path.is_dir() else [path]
    return files


def instructions(dockerfile: Path) -> str:
    """The Dockerfile without its comment lines (parser directives such as ``# syntax=`` kept): what the
    build reads, so a comment's edit does not rebuild an image."""
    kept = [line for line in dockerfile.read_text(encoding="utf-8").splitlines()
            if not line.lstrip().startswith("#") or _DIRECTIVE.match(line)]
    return "\n".join(kept)


def recipe(name: str, args: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The Dockerfile an image is built from (``images/<folder>/Dockerfile``) and its build arguments: ``args`` and,
    for a :data:`VARIANTS` image, its own."""
    folder, fixed = VARIANTS.get(name, (name, {}))
    return f"images/{folder}/Dockerfile", {**args, **fixed}


def image_tag(name: str, base: str, args: dict[str, str], context: Path | None = None) -> str:
    """``localhost/anchorage/<name>:<hash>`` of everything the build reads (see the module docstring)."""
    context = context or checkout.find()
    file, args = recipe(name, args)
    dockerfile = context / file
    digest = hashlib.sha256()
    digest.update((image_id(base) or base).encode() + json.dumps(RECIPE).encode())
    digest.update(json.dumps(sorted(args.items())).encode())
    digest.update(instructions(dockerfile).encode() + b"\0")
    for path in copied_sources(dockerfile, context, args):
        digest.update(str(path.relative_to(context)).encode() + b"\0" + path.read_bytes() + b"\0")
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
        # a slow or dropped download is retried (pip: 5 retries of 15 s by default; a read timeout cost a CI run)
        pip_conf.write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\ntimeout = 60\nretries = 10\n",
                            encoding="utf-8")
        yield ["-v", f"{bundle}:/etc/ssl/certs/ca-certificates.crt:ro", "-v", f"{pip_conf}:/etc/pip.conf:ro"]


def build(name: str, base: str, args: dict[str, str] | None = None, context: Path | None = None) -> str:
    """Build ``images/<name>`` (or a :data:`VARIANTS` image's folder) of the checkout ``context`` (default:
    :func:`checkout.find`) on ``base`` unless an image of the same content exists; its tag."""
    context = context or checkout.find()
    args = {"BASE_IMAGE": base, **(args or {})}
    tag = image_tag(name, base, args, context)
    if image_id(tag) is not None:
        print(f"{name}: cached as {tag}")
    else:
        dockerfile, every = recipe(name, args)
        flags = [arg for key, value in sorted(every.items()) for arg in ("--build-arg", f"{key}={value}")]
        with build_trust() as mounts:
            buildah(*RECIPE, *flags, *mounts, "-f", dockerfile, "-t", tag, str(context), stream=True)
        print(f"{name}: built {tag}")
    prune(name, spare=tag)  # also when cached: other checkouts' builds age past YOUNG_SEC while this one is reused
    return tag


def build_image(name: str, base: str, args: dict[str, str] | None = None, built: dict[str, str] | None = None,
                context: Path | None = None) -> str:
    """:func:`build` of ``images/<name>``, on the image it is built on (:data:`BUILT_ON`, built first) or ``base``;
    each image's tag lands in ``built`` (by name), so one image is built once per call chain."""
    built = built if built is not None else {}
    if name not in built:
        under = BUILT_ON.get(name)
        if under is not None:
            build_image(under, base, args, built, context)
        built[name] = build(name, built[under] if under is not None else base, args, context)
    return built[name]


def prune(name: str, keep: int = KEEP, young_sec: float = YOUNG_SEC, spare: str | None = None) -> list[str]:
    """Remove all but the ``keep`` newest builds of ``images/<name>`` (each content change leaves one behind,
    gigabytes in vfs storage), any younger than ``young_sec`` (another build on this machine may be using it as
    the base of its next image right now) and ``spare`` (the build the caller is about to use); what was removed.
    Two are kept so a branch and main do not rebuild in turn."""
    removed = []
    old = [(created, tag) for created, tag in builds(name)[keep:]
           if time.time() - created > young_sec and tag != spare]
    for _, tag in old:  # one a working container still uses stays (buildah refuses; no harm)
        if subprocess.run(["buildah", *storage(), "rmi", tag], capture_output=True, check=False).returncode == 0:
            removed.append(tag)
    return removed


def builds(name: str) -> list[tuple[float, str]]:
    """The local builds of ``images/<name>``: (when made, Unix time; tag), newest first."""
    out = buildah("images", "--json", quiet=True)
    prefix = f"localhost/anchorage/{name}:"
    return sorted(((_created(image), tag) for image in json.loads(out or "[]")
                   for tag in image.get("names") or [] if tag.startswith(prefix)), reverse=True)


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


