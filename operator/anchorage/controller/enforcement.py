"""The NetworkPolicy preflight: trials start only where a probe has shown that the policies are enforced.

A NetworkPolicy is only a request: without an engine (Calico, Cilium, kube-router, ...) the API server stores it
and nothing enforces it, and an agent reaches everything. So before the operator starts trials in a namespace, it
proves enforcement there with three short-lived pods (:func:`probe`), on the nodes where trials run:

* a *listener* (no Anchorage label: no policy selects it) accepting TCP connections;
* a *control* pod (no Anchorage label either) that must connect to it — the pod network works;
* an *enforced* pod, labelled as every pod the operator creates (``app.kubernetes.io/managed-by=anchorage``, so the
  default-deny policy P1 selects it), that must NOT connect to it, though it tries several times after a pause.

Control connected and enforced refused: enforced. The enforced pod connected: not enforced. The control pod could
not connect, or a pod never ran: unconfirmed (the probe proves nothing). Each pod's result is its container's exit
code as the kubelet reports it. The verdict is kept per namespace (:data:`VERDICTS`) and probed again every
:data:`RECHECK` seconds in the background (the last verdict holds meanwhile); the trials namespace is probed at the
operator's start.

:func:`admit`, called before a trial's Job is made: with ``require_enforcement`` (the default; the chart's
``trials.networkPolicies.requireEnforcement``, ``anchorage operator --no-require-enforcement`` opts out) a trial
waits — its status ``Pending`` with the reason and the fix, one Warning Event — until the namespace's verdict is
*enforced*; its campaign's sweep or the lone trials' watchdog try it again.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from anchorage.controller import kube, policies
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.jobs import OperatorConfig
from anchorage.runtime.kube.status import Condition, TrialStatus, now_rfc3339
from anchorage.trials import Phase

log = logging.getLogger("anchorage.enforcement")
#: Seconds between two probes of a namespace.
RECHECK = 3600.0
#: Seconds a probe pod may take to run (scheduling and the image's pull included).
POD_SECONDS = 180.0
PORT = 8080
LABEL = "anchorage.dev/preflight"
#: The phase of a trial waiting for the preflight.
WAITING = str(Phase.PENDING)
ENFORCED, NOT_ENFORCED, UNCONFIRMED, PROBING = "enforced", "not-enforced", "unconfirmed", "probing"
FIX = ("install a NetworkPolicy engine that enforces ingress and egress policies (Calico, Cilium, kube-router, ...), "
       "or, only on a cluster you trust, start trials without it: trials.networkPolicies.requireEnforcement=false "
       "(anchorage operator --no-require-enforcement)")
LISTEN = ("import socket\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          f"s.bind(('0.0.0.0', {PORT}))\ns.listen(16)\nwhile True:\n    s.accept()[0].close()\n")
CONNECT = ("import socket, sys, time\nhost, tries, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])\n"
           "time.sleep(pause)\nfor _ in range(tries):\n    try:\n"
           f"        socket.create_connection((host, {PORT}), timeout=3).close()\n        sys.exit(0)\n"
           "    except OSError:\n        time.sleep(1)\nsys.exit(1)\n")


@dataclass(frozen=True)
class Verdict:
    """A namespace's enforcement as last probed: ``state`` (:data:`ENFORCED`, :data:`NOT_ENFORCED`,
    :data:`UNCONFIRMED`, :data:`PROBING`), what showed it, when (``time.time()``)."""

    state: str
    detail: str
    at: float


VERDICTS: dict[str, Verdict] = {}
_PROBING: set[str] = set()
_REFUSED: set[str] = set()  # trial uids told (status and Event) for the current refusal
_LOCK = threading.Lock()


class Waiting(kopf.TemporaryError):
    """The trial waits for its namespace's NetworkPolicies to be confirmed enforced."""


def _pod(name: str, namespace: str, labels: dict[str, str], script: str, args: list[str],
         config: OperatorConfig, *, ready: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "probe", "image": config.operator_image, "command": ["python", "-c", script, *args],
        "securityContext": jobs._restricted(),
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}}
    if ready:
        container["readinessProbe"] = {"tcpSocket": {"port": PORT}, "periodSeconds": 1}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
                     "terminationGracePeriodSeconds": 0, "securityContext": jobs._pod_security(),
                     "containers": [container], **jobs.scheduling(config)}}


def _wait(namespace: str, name: str, done: Any, seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        pod = kube.get_pod(namespace, name)
        if pod is not None and done(pod):
            return pod
        if time.monotonic() > deadline:
            phase = ((pod or {}).get("status") or {}).get("phase", "gone")
            raise TimeoutError(f"the probe pod {namespace}/{name} did not get there within {seconds:g} s "
                               f"(phase {phase})")
        time.sleep(1)


def _exit_code(pod: Mapping[str, Any]) -> int | None:
    for item in (pod.get("status") or {}).get("containerStatuses") or []:
        ended = (item.get("state") or {}).get("terminated")
        if ended is not None:
            code = ended.get("exitCode")
            return code if isinstance(code, int) else None
    return None


def _ended(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return bool(status.get("podIP")) and any(c.get("type") == "Ready" and c.get("status") == "True"
                                              for c in status.get("conditions") or [])


def probe(namespace: str, config: OperatorConfig) -> Verdict:
    """Prove (or not) that ``namespace``'s NetworkPolicies are enforced (see the module docstring)."""
    policies.reconcile(namespace, config)
    suffix = secrets.token_hex(3)
    names = {role: f"anchorage-preflight-{role}-{suffix}" for role in ("listener", "control", "enforced")}
    try:
        kube.create_pod(_pod(names["listener"], namespace, {LABEL: "listener"}, LISTEN, [], config, ready=True))
        listener = _wait(namespace, names["listener"], _ready, POD_SECONDS)
        address = str(listener["status"]["podIP"])
        kube.create_pod(_pod(names["control"], namespace, {LABEL: "control"}, CONNECT, [address, "20", "0"], config))
        kube.create_pod(_pod(names["enforced"], namespace, {**jobs.MANAGED_BY, jobs.LABEL_ROLE: "preflight",
                                                             LABEL: "enforced"}, CONNECT, [address, "3", "3"], config))
        control = _exit_code(_wait(namespace, names["control"], _ended, POD_SECONDS))
        enforced = _exit_code(_wait(namespace, names["enforced"], _ended, POD_SECONDS))
    except (TimeoutError, kube.ApiError, kopf.TemporaryError, kopf.PermanentError, OSError) as exc:
        return Verdict(UNCONFIRMED, f"the probe did not run: {exc}", time.time())
    finally:
        for name in names.values():
            try:
                kube.delete_pod(namespace, name)
            except Exception as exc:  # (a leftover probe pod is deleted by the next probe's namespace sweep)
                log.warning("could not delete the probe pod %s/%s: %s", namespace, name, exc)
    if enforced == 0:
        return Verdict(NOT_ENFORCED, f"a pod under the default-deny policy {jobs.POLICY_DENY} connected to another "
                       f"pod: nothing enforces the NetworkPolicies of {namespace}", time.time())
    if control != 0:
        return Verdict(UNCONFIRMED, f"the control pod (under no policy) could not connect either (exit {control}): the "
                       "probe proves nothing (does the pod network work?)", time.time())
    return Verdict(ENFORCED, f"the default-deny policy stopped a connection the control pod made ({namespace})",
                   time.time())


def _run(namespace: str, config: OperatorConfig) -> None:
    try:
        verdict = probe(namespace, config)
    except Exception as exc:  # a bug: said, and the next admit probes again
        log.exception("the NetworkPolicy probe of %s failed", namespace)
        verdict = Verdict(UNCONFIRMED, f"the probe failed: {exc}", time.time())
    with _LOCK:
        previous = VERDICTS.get(namespace)
        VERDICTS[namespace] = verdict
        _PROBING.discard(namespace)
        if previous is None or previous.state != verdict.state:
            _REFUSED.clear()  # trials are told again under a new verdict
    level = logging.INFO if verdict.state == ENFORCED else logging.WARNING
    log.log(level, "NetworkPolicies in %s: %s (%s)", namespace, verdict.state, verdict.detail)


def start(namespace: str, config: OperatorConfig) -> None:
    """Probe ``namespace`` in the background unless a probe of it runs already."""
    with _LOCK:
        if namespace in _PROBING:
            return
        _PROBING.add(namespace)
    threading.Thread(target=_run, args=(namespace, config), name=f"preflight {namespace}", daemon=True).start()


def verdict(namespace: str, config: OperatorConfig) -> Verdict:
    """The namespace's verdict (:data:`PROBING` before the first one); starts a probe when none is known or the last
    is older than :data:`RECHECK` (or was not a confirmation: tried again after a minute)."""
    with _LOCK:
        known = VERDICTS.get(namespace)
    age = time.time() - known.at if known is not None else None
    if age is None or age > RECHECK or (known is not None and known.state != ENFORCED and age > 60):
        start(namespace, config)
    return known or Verdict(PROBING, "the probe runs", time.time())


def admit(trial: Mapping[str, Any], namespace: str, config: OperatorConfig) -> None:
    """Let a trial's Job go to ``namespace`` only once its policies are confirmed enforced (unless
    ``require_enforcement`` is off); else :class:`Waiting`, the trial told why once (status and Event)."""
    if not config.require_enforcement:
        return
    found = verdict(namespace, config)
    if found.state == ENFORCED:
        return
    if found.state == PROBING:
        raise Waiting(f"waiting for the NetworkPolicy probe of {namespace}", delay=5)
    meta = trial["metadata"]
    message = f"NetworkPolicies are not confirmed enforced in {namespace}: {found.detail}. Fix: {FIX}"
    with _LOCK:
        told = meta["uid"] in _REFUSED
        _REFUSED.add(meta["uid"])
    if not told:
        waiting = TrialStatus(phase=Phase.PENDING, message=message[:1000], conditions=[Condition(
            type="Ready", status="False", reason="NetworkPolicyUnconfirmed", message=message[:1000],
            observed_generation=meta.get("generation"), last_transition_time=now_rfc3339())])
        kube.patch_status("trials", meta["namespace"], meta["name"], waiting.patch())
        kube.post_event(dict(trial), "Warning", "NetworkPolicyUnconfirmed", message)
    raise Waiting(message, delay=30)


@kopf.on.startup()
async def start_probe(**_: Any) -> None:
    """Keep the trials namespace's policies and probe it as the operator starts (in the background)."""
    from anchorage.controller.settings import config

    cfg = config()
    if cfg.trials_namespace:
        try:
            await kube.in_thread(policies.ensure, cfg.trials_namespace, cfg)
        except Exception:  # said; the first trial's Job tries again
            log.exception("keeping the networkpolicies of %s failed", cfg.trials_namespace)
        if cfg.require_enforcement:
            start(cfg.trials_namespace, cfg)
