"""The smoke commands of Anchorage's images (``anchorage images build --smoke``, ``tests/images``).

The agent image's three CLIs print their pinned versions and its Python stack imports, as the agent user (uid 65532,
the Job's ``runAsUser``); the verifier image scores the smoke task's expected result with every gate the laptop runs
(same command on the host, same gates and verdicts); the operator image's entry points (``anchorage operator``,
``anchorage gateway``, the pods' ``python -m anchorage.runtime.kube.pod``) start and its runtime dependencies import,
as its user (uid 10004). Each runs in a working container of the built image (``buildah run``), removed after.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from anchorage.agentclis.installing import load_pins
from anchorage.images import checkout
from anchorage.images.building import BuildError, buildah, run, storage


@contextlib.contextmanager
def container(tag: str) -> Iterator[str]:
    ident = buildah("from", "--pull-never", tag, quiet=True).strip()
    try:
        yield ident
    finally:
        subprocess.run(["buildah", *storage(), "rm", ident], capture_output=True, check=False)


#: How often a command is run when ``buildah run`` returned nothing: it lost a command's output now and then on a loaded
#: machine (the command had printed; asked again, it printed), and every smoke command prints something.
ATTEMPTS = 3


def in_image(ident: str, *command: str, user: str | None = None) -> str:
    """What ``command`` printed in the working container (as ``user``); BuildError when it printed nothing in
    :data:`ATTEMPTS` runs."""
    who = ["--user", user] if user else []
    for _ in range(ATTEMPTS):
        out = buildah("run", "--isolation", "chroot", *who, ident, "--", *command, quiet=True)
        if out.strip():
            return out
    raise BuildError(f"{' '.join(command)!r} printed nothing in {ATTEMPTS} runs in the working container {ident}")


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


def smoke_verifier(tag: str, task: str = "smoke-inventory", context: Path | None = None) -> dict[str, object]:
    """The verifier image scores the task's expected result (the same command on the host must agree) and its
    entry point prints its help."""
    source = (context or checkout.find()) / "tasks" / task
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
#: What the operator image goes without: the package's ``agent-stack`` extra, imported by agents and the tasks'
#: reproductions only (they run in the agent image and the tasks' own images).
OPERATOR_ABSENT = ("pandas", "sklearn", "statsmodels", "highspy", "xlrd")


def smoke_operator(tag: str) -> dict[str, object]:
    """The operator image's entry points answer ``--help`` and its runtime dependencies import, as uid 10004."""
    user = "10004:10004"
    found: dict[str, object] = {}
    with container(tag) as ident:
        for name, command in (("operator", ["anchorage", "operator", "--help"]),
                              ("gateway", ["anchorage", "gateway", "--help"]),
                              ("kube.pod", ["python", "-m", "anchorage.runtime.kube.pod", "--help"])):
            out = in_image(ident, *command, user=user)
            if "usage" not in out.lower():
                raise BuildError(f"{' '.join(command)} in {tag} printed no usage: {out[-400:]!r}")
            found[name] = True
        script = f"import importlib, json; print(json.dumps({{m: importlib.import_module(m).__name__ " \
                 f"for m in {list(OPERATOR_IMPORTS)!r}}}))"
        found["imports"] = sorted(json.loads(in_image(ident, "python", "-c", script, user=user)))
        script = f"import importlib.util, json; print(json.dumps([m for m in {list(OPERATOR_ABSENT)!r} " \
                 "if importlib.util.find_spec(m) is not None]))"
        found["agent_stack"] = json.loads(in_image(ident, "python", "-c", script, user=user))
        found["user"] = in_image(ident, "id", "-u", user=user).strip()
        found["prices"] = in_image(ident, "sh", "-c", "ls \"$ANCHORAGE_PRICES\" | head -1", user=user).strip()
    return found


#: The smoke command of each image that has one.
SMOKES: dict[str, Callable[[str], dict[str, object] | dict[str, str]]] = {
    "agent-base": smoke_agent, "verifier": smoke_verifier, "operator": smoke_operator}
