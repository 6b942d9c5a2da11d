"""``anchorage images build|push``: Anchorage's images, built here and published to a registry a cluster pulls from.

Registered by :mod:`anchorage.cli`; the work is :mod:`anchorage.images`. Both commands need a checkout of the
repository (the Dockerfiles' build context): the one around the current folder, else the one the package is
installed from, else ``--context``; elsewhere they exit 2 saying so. Images are cached by content, so ``push`` after
``build`` (or a second ``push``) builds nothing. ``push --registry R`` puts each image at ``R/anchorage/<name>`` with
the chart's tag (its ``appVersion``), prints each digest, and ``--values FILE`` writes the chart's values pinning
every image by digest. With ``--json`` progress goes to stderr and stdout has one JSON object.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import typer

from anchorage.commands import print_json

CONTEXT_HELP = ("Checkout of the Anchorage repository to build from (the Dockerfiles' build context; default: the one "
                "around the current folder, else the one this package is installed from).")
NAMES_HELP = "Images (folders of images/): agent-base, verifier, operator, tasks (default: all four)."

images_app = typer.Typer(
    help="Build Anchorage's images with buildah (no Docker engine) and push them to a registry. Needs a checkout of "
         "the repository: the Dockerfiles under images/ copy its operator/, prices/ and tasks/.",
    no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(images_app, name="images")


def _names(names: list[str] | None) -> list[str]:
    from anchorage.errors import InputError, did_you_mean
    from anchorage.images.publishing import PUBLISHED

    wanted = list(names or PUBLISHED)
    for name in wanted:
        if name not in PUBLISHED:
            raise InputError(f"unknown image {name!r}",
                             hint=did_you_mean(name, PUBLISHED) or f"use one of: {', '.join(PUBLISHED)}")
    return wanted


def _build(names: list[str], context: Path, base: str | None, build_args: list[str]) -> dict[str, str]:
    from anchorage.errors import InputError
    from anchorage.images import building

    bad = [item for item in build_args if "=" not in item]
    if bad:
        raise InputError(f"--build-arg {bad[0]!r} is not KEY=VALUE", hint="e.g. --build-arg AGENT_CLIS=codex")
    building.ensure_tools()
    start = base or building.build_base()
    print(f"base: {start}")
    extra = dict(item.split("=", 1) for item in build_args)
    built: dict[str, str] = {}
    for name in names:
        building.build_image(name, start, extra, built, context)
    return {name: built[name] for name in names}


@contextlib.contextmanager
def _progress(as_json: bool) -> Any:
    """Progress on stdout, or on stderr when stdout carries the JSON result."""
    if as_json:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    else:
        yield


@images_app.command("build")
def build(
    names: list[str] = typer.Argument(None, help=NAMES_HELP),
    context: Path = typer.Option(None, "--context", help=CONTEXT_HELP),
    base: str = typer.Option("", "--base", help="Base image from a registry (e.g. python:3.12.7-slim-bookworm) "
                             "instead of the debootstrap base made here from Debian's packages."),
    build_arg: list[str] = typer.Option([], "--build-arg", metavar="KEY=VALUE", help="Build argument (repeatable)."),
    smoke: bool = typer.Option(False, "--smoke", help="Run each image's smoke command after building it."),
    as_json: bool = typer.Option(False, "--json", help="Print the local tags by name as JSON (progress on stderr)."),
) -> None:
    """Build images locally (buildah, cached by content: an unchanged image is not rebuilt).

    Run it in a checkout of the Anchorage repository (or give --context): the Dockerfiles' build context."""
    from anchorage.images import checkout
    from anchorage.images.smoke import SMOKES

    root = checkout.find(context)
    wanted = _names(names)
    with _progress(as_json):
        tags = _build(wanted, root, base or None, build_arg)
        for name in wanted:
            print(f"{name}: {tags[name]}")
            if smoke and name in SMOKES:
                print(f"{name}: smoke ok {SMOKES[name](tags[name])}")
    if as_json:
        print_json(tags)


@images_app.command("push")
def push(
    registry: str = typer.Option(..., "--registry", help="Registry (HOST, HOST:PORT or HOST/PATH): each "
                                 "image goes to REGISTRY/anchorage/NAME."),
    names: list[str] = typer.Argument(None, help=NAMES_HELP),
    tag: str = typer.Option("", "--tag", help="Tag of the pushed images (default: the chart's appVersion, the tag the "
                            "chart pulls)."),
    tls_verify: str = typer.Option("true", "--tls-verify", metavar="true|false",
                                   help="Require HTTPS and verify the registry's certificate (false: plain HTTP or a "
                                        "self-signed certificate), as buildah's --tls-verify."),
    authfile: Path = typer.Option(None, "--authfile", help="Credentials file (default: buildah's, which `buildah "
                                  "login REGISTRY` writes; a Docker config.json works too)."),
    disable_compression: bool = typer.Option(False, "--disable-compression",
                                             help="Push layers uncompressed (a registry on this machine or network: no "
                                                  "gzip CPU); default: gzip, for remote registries."),
    values: Path = typer.Option(None, "--values", help="Write the chart's values that pin every pushed image by digest "
                                "to this file (helm install -f FILE)."),
    context: Path = typer.Option(None, "--context", help=CONTEXT_HELP),
    base: str = typer.Option("", "--base", help="Base image for images not built yet (see `anchorage images build`)."),
    build_arg: list[str] = typer.Option([], "--build-arg", metavar="KEY=VALUE", help="Build argument (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Print each image's repository, tag and digest as JSON."),
) -> None:
    """Build (if needed) and push images to REGISTRY/anchorage/<name>:<the chart's appVersion>; print their digests.

    Run it in a checkout of the Anchorage repository (or give --context). Then `helm install ... --set
    global.imageRegistry=REGISTRY` pulls them (or -f the --values file to pin them by digest)."""
    import yaml

    from anchorage.errors import InputError
    from anchorage.images import checkout, publishing

    if tls_verify not in ("true", "false"):
        raise InputError(f"--tls-verify {tls_verify!r} is neither true nor false", hint="--tls-verify=false for a "
                         "plain-HTTP registry")
    if not registry.strip("/") or "://" in registry:
        raise InputError(f"--registry {registry!r} is not a registry name",
                         hint="give HOST, HOST:PORT or HOST/PATH, without a scheme (e.g. registry.example.com:5000)")
    if authfile is not None and not authfile.is_file():
        raise InputError(f"--authfile {authfile} does not exist", hint="buildah login REGISTRY writes one")
    root = checkout.find(context)
    wanted = _names(names)
    version = tag or checkout.chart_version(root)
    pushed: dict[str, publishing.Pushed] = {}
    with _progress(as_json):
        tags = _build(wanted, root, base or None, build_arg)
        for name in wanted:
            pushed[name] = publishing.push(name, tags[name], registry, version, tls_verify=tls_verify == "true",
                                           authfile=authfile, compress=not disable_compression)
        for image in pushed.values():
            print(f"{image.name}: {image.reference} {image.digest}")
        if values is not None:
            values.write_text(yaml.safe_dump(publishing.chart_values(pushed), sort_keys=False), encoding="utf-8")
            print(f"values pinning the images by digest: {values} (helm install ... -f {values})")
    if as_json:
        print_json({name: {"repository": image.repository, "tag": image.tag, "digest": image.digest,
                           "reference": image.reference} for name, image in pushed.items()})
