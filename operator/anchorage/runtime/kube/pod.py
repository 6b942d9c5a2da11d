"""The programs that run inside the operator's pods: ``python -m anchorage.runtime.kube.pod CMD``.

Containers built by ``anchorage.runtime.kube.jobs`` call it; nothing else does.

* ``fetch-task``   (trial init container): copy the task's data (and the oracle's solution) to a volume, and a
  replay's artifact into the results (exit :data:`REPLAY_MISSING_EXIT` when it does not exist);
* ``copy-tasks``   (init container of the operator's own pod, and of verifier and protocol pods, in the task bundle
  image ``images/tasks``): copy whole task folders — all, or those named, without the folders excluded (a
  verifier never gets a task's ``solution/``) — to a volume that ``ANCHORAGE_TASKS`` then points at;
* ``await-policy`` (trial init container, the last before the agent): wait until this pod's egress to the
  Kubernetes API — which no trial pod's NetworkPolicy allows — is blocked, so the agent never starts in the moment
  after a pod's start when a policy engine has not yet applied its policies to the pod (kube-router takes about a
  second); exit :data:`POLICY_OPEN_EXIT` when it stays open;
* ``upload``       (native sidecar, the only container with storage credentials): wait until the main
  container wrote its exit code (or SIGTERM, which the kubelet sends once the main container ended), wait until
  the store answers (a trial pod reaches it only after its agent ended), upload the given folders, write
  ``upload.json`` last, exit;
* ``fetch-artifacts`` (verifier init container): copy artifacts from the store into the pod;
* ``score``        (verifier container, no network, no credentials): the Anchorage scorer;
* ``protocol``     (protocol container, the gateway only, its own token): a trial's panel or CBU.

The store is ``anchorage.store.open_store`` (``file://`` or ``s3://``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from anchorage.errors import AnchorageError

if TYPE_CHECKING:
    from anchorage.store import ArtifactStore


#: ``fetch-task``'s exit code when the replayed artifact does not exist (``EX_NOINPUT``). The operator reads it
#: from the Pod's init-container status (platform evidence: no agent code has run yet) and ends the trial by the
#: local engine's rule (``anchorage.trials.agents.plans.missing_replay_message``): Failed, never retried.
REPLAY_MISSING_EXIT = 66


#: ``await-policy``'s exit code when the pod's egress stayed open: the operator ends the attempt as the platform's
#: failure (``anchorage.controller.evidence``) and the agent never ran.
POLICY_OPEN_EXIT = 67


class ReplayMissing(AnchorageError):
    """``fetch-task``: the replay's artifact is neither a file nor a key of the store."""


def open_store(uri: str) -> ArtifactStore:
    """The artifact store at ``uri`` (``file://`` or ``s3://``; credentials come from the environment)."""
    from anchorage.store import open_store as open_uri

    return open_uri(uri)


def _copytree(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True)


def fetch_task(args: argparse.Namespace) -> None:
    """Copy the task's data (and solution, for the oracle) into ``--dest``."""
    from anchorage.tasks import load_task, resolve_task

    task = load_task(resolve_task(args.task))
    dest = Path(args.dest)
    _copytree(task.data_dir, dest / "data")
    (dest / "data").mkdir(parents=True, exist_ok=True)
    for folder in [*args.folder, *(["solution"] if args.solution else [])]:
        source = (task.root / folder).resolve()
        if task.root.resolve() not in source.parents:
            raise AnchorageError(f"--folder {folder!r} is not inside the task")
        _copytree(source, dest / folder)
    try:
        if args.replay_in_task:
            Path(args.results, task.artifact_name).write_bytes((task.root / args.replay_in_task).read_bytes())
        elif args.replay:
            source = args.replay.removeprefix("file://")
            if Path(source).is_dir():  # a results folder (as the local engine replays it)
                _copytree(Path(source), Path(args.results))
                return
            if Path(source).exists():
                data = Path(source).read_bytes()
            elif os.environ.get("ANCHORAGE_STORE"):
                data = open_store(os.environ["ANCHORAGE_STORE"]).get_bytes(source)
            else:
                raise FileNotFoundError(f"{source}: no such file (and no store to read a key from)")
            Path(args.results, task.artifact_name).write_bytes(data)
    except FileNotFoundError as exc:  # neither a file nor a store key: the entry's problem, not the platform's
        raise ReplayMissing(str(exc)) from exc


class PolicyOpen(AnchorageError):
    """``await-policy``: the pod still reaches the Kubernetes API after the allowed wait."""


def await_policy(args: argparse.Namespace) -> None:
    """Return once two connections in a row to the Kubernetes API's Service (``KUBERNETES_SERVICE_HOST``, which the
    kubelet gives every container) fail — refused or dropped, the policies now cover this pod; raise
    :class:`PolicyOpen` when one still connects after ``--seconds``."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise PolicyOpen("no KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT in the environment: nothing to check the "
                         "pod's NetworkPolicies against, so the agent is not started")
    deadline, blocked = time.monotonic() + args.seconds, 0
    while blocked < 2:
        try:
            socket.create_connection((host, int(port)), timeout=args.probe_timeout).close()
        except OSError:
            blocked += 1
        else:
            blocked = 0
            if time.monotonic() >= deadline:
                raise PolicyOpen(f"the pod still reaches the Kubernetes API ({host}:{port}) {args.seconds:g} s after "
                                 "it started: its NetworkPolicies are not enforced for it, so the agent is not started")
        time.sleep(args.interval)


def copy_tasks(args: argparse.Namespace) -> None:
    """Copy task folders (``--task`` each, else every task where names are looked up: ``ANCHORAGE_TASKS``) into
    ``--dest/<slug>``, leaving out the ``--exclude`` subfolders."""
    from anchorage.tasks import list_tasks, resolve_task, search_dirs

    found: dict[str, Path] = {}
    for folder in search_dirs():
        for root in list_tasks(folder):
            found.setdefault(root.name, root)
    roots = [resolve_task(name) for name in args.task] if args.task else list(found.values())
    if not roots:
        raise AnchorageError("no task to copy: ANCHORAGE_TASKS names no folder of tasks (is this the task image?)")
    dest = Path(args.dest)
    for root in roots:
        shutil.copytree(root, dest / root.name, dirs_exist_ok=True,
                        ignore=lambda folder, _names, top=root: list(args.exclude) if Path(folder) == top else [])
    print(f"copied {len(roots)} task(s) to {dest}")


def _terminated() -> threading.Event:
    """An event set when this process gets SIGTERM (the kubelet's word that the main container has ended)."""
    term = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: term.set())
    return term


def _wait_for(run_dir: Path, term: threading.Event) -> None:
    while not term.is_set() and not (run_dir / "exit-code").exists():
        term.wait(0.2)


def _endpoint(store: ArtifactStore) -> tuple[str, int] | None:
    """The (host, port) the store's client connects to; None for a store on a file system."""
    client = getattr(store, "client", None)
    url = getattr(getattr(client, "meta", None), "endpoint_url", None)
    if not isinstance(url, str):
        return None
    parts = urllib.parse.urlsplit(url)
    return (parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))


def _reach(store: ArtifactStore, term: threading.Event, limit: float, pause: float = 0.2,
           patience: tuple[float, float] = (0.25, 2.0)) -> None:
    """Wait until the store's endpoint accepts a connection (its name resolved). A trial pod reaches the store only
    once the operator has seen its agent container end and labelled the pod (its NetworkPolicy then opens): until
    SIGTERM (the kubelet's word that the agent ended) this waits as long as it takes; after it, ``limit`` seconds at
    most (the pod's grace period is the rest of the upload's time).

    While the policy drops its packets, an attempt (each DNS query of it, then the connection) fails only by its
    timeout: the first waits ``patience[0]`` seconds, each next one twice as long up to ``patience[1]``, ``pause``
    apart: short at first, so the upload starts within a moment of the policy's opening; longer later, for a store
    far away."""
    from anchorage.runtime.kube import resolver

    target = _endpoint(store)
    if target is None:
        return
    deadline: float | None = None
    wait = patience[0]
    while True:
        try:
            with resolver.query_timeout(wait):
                socket.create_connection(target, timeout=wait).close()
            return
        except OSError as exc:
            problem = exc
        wait = min(wait * 2, patience[1])
        if term.is_set() and deadline is None:
            deadline = time.monotonic() + limit
        if deadline is not None and time.monotonic() >= deadline:
            raise AnchorageError(f"the store at {target[0]}:{target[1]} did not answer within {limit:g} s of the main "
                                 f"container's end ({problem}): is the pod's store egress open "
                                 "(trials.networkPolicies.storeEgress)?")
        time.sleep(pause)


def upload(args: argparse.Namespace) -> None:
    """Sidecar: wait for the main container, reach the store, upload folders, then write ``upload.json`` last.

    The folders are the agent's: only regular files are uploaded, each opened beneath its folder with
    no link followed (:mod:`anchorage.confined` — a symlink to this container's storage credentials
    uploads nothing), at most ``--max-files`` entries and ``--max-bytes`` bytes per folder; what was left
    out is listed in ``upload.json`` (``skipped``). A malformed exit-code file is recorded as unknown.
    In a trial pod the store's name is resolved through the cluster DNS given in the environment
    (:mod:`anchorage.runtime.kube.resolver`: the pod itself has none), and the store is reachable only after the agent
    ended (:func:`_reach`).
    """
    term = _terminated()  # first: the kubelet may end the main container (and send SIGTERM) at once
    from anchorage.runtime.kube import resolver
    run_dir = Path(args.wait)
    resolver.install_from_env()
    # before the wait, while the main container runs: the S3 client's import and set-up (no network) take seconds on
    # the sidecar's small CPU share (jobs.SIDECAR_CPU), and after the agent's end they would delay its upload
    store = open_store(os.environ["ANCHORAGE_STORE"])
    _wait_for(run_dir, term)
    _reach(store, term, args.reach_seconds)
    dest = os.environ["ANCHORAGE_DEST"].strip("/")
    files: dict[str, int] = {}
    skipped: list[str] = []
    quotas = {name: int(size) for name, _, size in (item.partition("=") for item in args.quota)}
    oversized: list[str] = []
    for item in args.put:  # file by file: the trial's completion marker is the operator's to write
        name, _, folder = item.partition("=")
        if Path(folder).is_dir():
            files[name], left_out = _upload_folder(store, Path(folder), "/".join(p for p in (dest, name) if p),
                                                   max_files=args.max_files, max_bytes=args.max_bytes)
            skipped += [f"{name}/{entry}" for entry in left_out]
            if name in quotas:
                oversized += _over_quota(Path(folder), quotas[name])
    marker: dict[str, object] = {"exit_code": _exit_code(run_dir), "files": {k: v for k, v in files.items() if v}}
    if skipped:
        marker["skipped"] = skipped[:50]
    if oversized:  # measured here, by the sidecar: the agent cannot write this marker
        marker["oversized"] = "; ".join(oversized)
    store.put_bytes(f"{dest}/{args.marker}", json.dumps(marker).encode())
    # Exiting now is safe for a native sidecar: the main container has already ended.


def _upload_folder(store: ArtifactStore, root: Path, prefix: str, *, max_files: int,
                   max_bytes: int) -> tuple[int, list[str]]:
    """Upload the regular files beneath ``root``; (how many were uploaded, what was left out and why)."""
    from anchorage import confined

    limits = confined.WalkLimits(max_entries=max_files)
    uploaded, total, skipped = 0, 0, []
    with confined.folder_fd(root) as top:
        for entry in confined.walk(top, limits):
            if entry.is_dir:
                continue
            if not entry.is_file:
                skipped.append(f"{entry.relative} (not a regular file)")
                continue
            try:
                fd, info = confined.open_regular(top, entry.relative)
            except confined.ConfinedError as exc:
                skipped.append(f"{entry.relative} ({exc.reason})")
                continue
            try:
                if total + info.st_size > max_bytes:
                    skipped.append(f"{entry.relative} (over the {max_bytes}-byte upload cap)")
                    continue
                total += info.st_size
                store.put_file(f"{prefix}/{entry.relative}", Path(f"/proc/self/fd/{fd}"))  # the checked file itself
                uploaded += 1
            finally:
                os.close(fd)
    if limits.truncated:
        skipped.append(f"(more than {max_files} entries: the rest)")
    skipped += [f"{path}/ (deeper than {confined.MAX_DEPTH} levels)" for path in limits.too_deep]
    return uploaded, skipped


def _over_quota(folder: Path, quota: int) -> list[str]:
    """Why ``folder`` (a memory-backed emptyDir of ``quota`` + 1 MiB) is over its quota, if it is."""
    from anchorage import confined

    used = confined.usage(folder, max_entries=20_000)
    if used.bytes > quota:
        return [f"{folder} holds {used.bytes} bytes, over the {quota}-byte quota"]
    try:
        vfs = os.statvfs(folder)
    except OSError:
        return []
    if vfs.f_bavail * vfs.f_frsize < 512 * 1024:
        return [f"{folder} is full (its {quota}-byte quota; small files use whole pages)"]
    return []


def _exit_code(run_dir: Path) -> int | None:
    """The agent's exit code as its wrapper wrote it (the agent could write there too: a number or None). Kept in
    the marker for people reading it; the operator classifies from the Pod's container statuses instead."""
    from anchorage import confined

    try:
        text = confined.read_bytes(run_dir, "exit-code", limit=64).decode("ascii", "replace").strip()
        return int(text) if text.lstrip("-").isdigit() else None
    except (confined.ConfinedError, ValueError):
        return None


def fetch_artifacts(args: argparse.Namespace) -> None:
    """Copy ``i=URI`` artifacts (store keys, file:// or paths) into ``--dest/i/``."""
    store = open_store(os.environ["ANCHORAGE_STORE"])
    for item in args.artifact:
        index, _, uri = item.partition("=")
        target = Path(args.dest, index)
        target.mkdir(parents=True, exist_ok=True)
        local = Path(uri.removeprefix("file://"))
        if uri.startswith("file://") or local.is_absolute():
            if local.is_dir():
                _copytree(local, target)
            elif local.exists():
                shutil.copy(local, target / local.name)
            continue
        prefix = uri.strip("/")
        keys = [k for k in store.list(prefix) if k.startswith(prefix + "/")]
        for key in keys or [prefix]:  # a folder of results, else one object
            relative = key[len(prefix) + 1:] if keys else prefix.rsplit("/", 1)[-1]
            try:
                data = store.get_bytes(key)
            except (OSError, KeyError):
                continue  # missing artifact: the scorer records it as ungradable
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            (target / relative).write_bytes(data)


def score(args: argparse.Namespace) -> None:
    """Score every ``i=OUT`` item of ``--src`` and write ``--out/OUT/score.json``."""
    from anchorage.scoring import score_artifact
    from anchorage.tasks import load_task, resolve_task

    task = load_task(resolve_task(args.task))
    for item in args.item:
        index, _, out = item.partition("=")
        record = score_artifact(task, Path(args.src, index), baseline=args.baseline, gates=args.gates,
                                lean=args.lean, profile=args.profile)
        target = Path(args.out, out)
        target.mkdir(parents=True, exist_ok=True)
        (target / "score.json").write_text(json.dumps(record.to_dict(), indent=1, default=str))


def protocol(args: argparse.Namespace) -> None:
    """A trial's ``verification.panel`` / ``.cbu`` on its solution (``--src``: the trial's results), each model
    call through the gateway with this pod's own token; writes ``--out/outcome.json`` (block + failure)."""
    from anchorage.tasks import load_task, resolve_task
    from anchorage.verify import protocols
    from anchorage.verify.models import GatewayClient, ModelClient
    from anchorage.verify.settings import CbuSettings, PanelSettings

    task = load_task(resolve_task(args.task))
    src = Path(args.src)
    artifact = str(src / args.artifact) if args.artifact and (src / args.artifact).is_file() else None

    def client() -> ModelClient | str:
        url, token = os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_API_KEY")
        if not url or not token:
            return f"verification.{args.step} needs the model gateway, but this pod has no gateway URL or token"
        return GatewayClient(url, token)

    if args.step == "panel":
        outcome = protocols.trial_panel(task, PanelSettings.model_validate_json(args.settings), src, artifact, client)
    else:
        outcome = protocols.trial_cbu(task, CbuSettings.model_validate_json(args.settings), src, artifact, client)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "outcome.json").write_text(json.dumps({"block": outcome.block, "failure": outcome.failure}, default=str))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m anchorage.runtime.kube.pod", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fetch-task", help="copy task data into a volume")
    p.add_argument("--task", required=True)
    p.add_argument("--dest", required=True)
    p.add_argument("--solution", action="store_true", help="same as --folder solution")
    p.add_argument("--folder", action="append", default=[], help="a folder of the task to copy (read-only binds)")
    p.add_argument("--replay")
    p.add_argument("--replay-in-task", help="replay this file of the task (an imported anchor's expected result)")
    p.add_argument("--results", default="/root/results")
    p.set_defaults(fn=fetch_task)
    p = sub.add_parser("copy-tasks", help="copy whole task folders into a volume (ANCHORAGE_TASKS)")
    p.add_argument("--dest", required=True)
    p.add_argument("--task", action="append", default=[], help="a task to copy (repeatable; default: every task)")
    p.add_argument("--exclude", action="append", default=[], help="a subfolder left out (e.g. solution)")
    p.set_defaults(fn=copy_tasks)
    p = sub.add_parser("await-policy", help="wait until the pod's NetworkPolicies block its egress to the API")
    p.add_argument("--seconds", type=float, default=60.0, help="how long the egress may stay open")
    p.add_argument("--interval", type=float, default=0.25, help="seconds between two connection attempts")
    p.add_argument("--probe-timeout", type=float, default=2.0, help="seconds one connection attempt may take")
    p.set_defaults(fn=await_policy)
    p = sub.add_parser("upload", help="sidecar: upload folders after the main container")
    p.add_argument("--wait", required=True)
    p.add_argument("--put", action="append", default=[])
    p.add_argument("--max-files", type=int, default=20_000, help="entries looked at per folder")
    p.add_argument("--max-bytes", type=int, default=2 * 1024**3, help="bytes uploaded per folder")
    p.add_argument("--quota", action="append", default=[],
                   help="NAME=BYTES: the folder's quota; over it, upload.json says 'oversized' (the model's failure)")
    p.add_argument("--marker", default="upload.json", help="name of the completion marker written last")
    p.add_argument("--reach-seconds", type=float, default=60.0,
                   help="after SIGTERM, how long to wait for the store to accept a connection")
    p.set_defaults(fn=upload)
    p = sub.add_parser("fetch-artifacts", help="copy artifacts from the store")
    p.add_argument("--dest", required=True)
    p.add_argument("--artifact", action="append", default=[])
    p.set_defaults(fn=fetch_artifacts)
    p = sub.add_parser("score", help="score artifacts with the Anchorage scorer")
    p.add_argument("--task", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--item", action="append", default=[])
    p.add_argument("--baseline")
    p.add_argument("--no-gates", dest="gates", action="store_false")
    p.add_argument("--lean", action="store_true", help="fill obligations{} with the Lean layer (verification.lean)")
    p.add_argument("--profile", help="the scoring profile (spec.scoring.profile; default: the default profile)")
    p.set_defaults(fn=score)
    p = sub.add_parser("protocol", help="a trial's verification panel or consequence-based utility")
    p.add_argument("--step", required=True, choices=["panel", "cbu"])
    p.add_argument("--task", required=True)
    p.add_argument("--settings", required=True, help="the step's settings (JSON)")
    p.add_argument("--src", required=True, help="the trial's results folder")
    p.add_argument("--artifact", help="the scored artifact's path inside --src")
    p.add_argument("--out", required=True)
    p.set_defaults(fn=protocol)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the pod programs."""
    args = _parser().parse_args(argv)
    try:
        args.fn(args)
    except ReplayMissing as exc:
        print(f"error: the replay artifact does not exist: {exc}", file=sys.stderr)
        return REPLAY_MISSING_EXIT
    except PolicyOpen as exc:
        print(f"error: {exc}", file=sys.stderr)
        return POLICY_OPEN_EXIT
    except AnchorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
