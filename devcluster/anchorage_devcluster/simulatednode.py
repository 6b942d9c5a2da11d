"""A *simulated* node: a Node of the real control plane whose pods run nothing, for the operator's load tests.

Started by the tests' session cluster and ``bench/kube_operator.py`` (``python -m
anchorage_devcluster.simulatednode --simulate MODULE:FUNCTION``), with a kubeconfig that authenticates it as
``system:node:<name>`` (so the Node authorizer and NodeRestriction limit it as they limit a kubelet). It exists because
thousands of trials cannot run on a two-core machine, and the operator's cost per trial is what the load tests
measure: it registers its Node (capacity as given), renews its Lease in ``kube-node-lease``, watches the pods the
scheduler binds to it, hands each to ``--simulate`` — a function that writes what Anchorage's pod programs would write
to the store and returns each container's exit code (``tests/simulated_pods.py``) — and reports the pod's status as a
kubelet would (phase, conditions, container states and exit codes); it removes deleted pods with grace 0 and, after a
restart, fails the pods it was running (``ContainerStatusUnknown``).

Nothing isolation-related runs or is tested on it: the real nodes (``realnode``) run every pod that runs a program.
The real Job controller, scheduler and garbage collector do the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import importlib
import json
import logging
import signal
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from anchorage_devcluster.binaries import KUBE_VERSION
from anchorage_devcluster.pods import Obj, PodRun, Simulate, now

log = logging.getLogger("anchorage.simulatednode")
LEASE_SEC = 40
RENEW_SEC = 10
STATUS_SEC = 60
STRATEGIC = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """The API answered an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class Api:
    """A small asynchronous client of the Kubernetes API from a kubeconfig (client certificate or token)."""

    def __init__(self, kubeconfig: Path) -> None:
        doc = yaml.safe_load(kubeconfig.read_text())
        context = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
        self.server = cluster["server"].rstrip("/")
        self.ssl = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
        if user.get("client-certificate"):
            self.ssl.load_cert_chain(user["client-certificate"], user["client-key"])
        self.headers = {"Accept": "application/json"}
        if user.get("token"):
            self.headers["Authorization"] = f"Bearer {user['token']}"
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self.headers, connector=aiohttp.TCPConnector(
                ssl=self.ssl, limit=32), timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                   params: dict[str, str] | None = None) -> Obj:
        data = json.dumps(body).encode() if body is not None else None
        async with self.session.request(method, self.server + path, data=data, params=params,
                                        headers={"Content-Type": content_type},
                                        timeout=aiohttp.ClientTimeout(total=60)) as response:
            text = await response.text()
            answer = json.loads(text) if text else {}
            if response.status >= 400:
                raise ApiError(response.status, str(answer.get("message") if isinstance(answer, dict) else text))
            return answer if isinstance(answer, dict) else {}

    async def watch(self, path: str, params: dict[str, str]) -> AsyncIterator[Obj]:
        """The events of one watch request, until the server ends it."""
        async with self.session.get(self.server + path, params={**params, "watch": "true"},
                                    timeout=aiohttp.ClientTimeout(total=None, sock_read=400)) as response:
            if response.status >= 400:
                raise ApiError(response.status, await response.text())
            async for line in response.content:
                if line.strip():
                    yield json.loads(line)


def _micro(stamp: dt.datetime) -> str:
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SimulatedNode:
    """One simulated Node (see the module docstring)."""

    def __init__(self, api: Api, name: str, *, workdir: Path, simulate: Simulate,
                 capacity: dict[str, str] | None = None) -> None:
        self.api, self.name = api, name
        self.workdir, self.simulate = workdir, simulate
        self.capacity = {"cpu": "64", "memory": "256Gi", "pods": "250", "ephemeral-storage": "500Gi",
                         **(capacity or {})}
        self.runs: dict[str, PodRun] = {}  # by pod uid
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.finished: set[str] = set()  # uids of pods that ended here
        self.started = dt.datetime.now(dt.UTC)

    # ------------------------------------------------------------------ the Node and its Lease
    def _node_status(self) -> Obj:
        stamp = now()
        ok = {"lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
        conditions = [{"type": kind, "status": "False", "reason": f"KubeletHas{reason}", "message": message, **ok}
                      for kind, reason, message in (
                          ("MemoryPressure", "SufficientMemory", "the node agent does not measure pressure"),
                          ("DiskPressure", "NoDiskPressure", "the node agent does not measure pressure"),
                          ("PIDPressure", "SufficientPID", "the node agent does not measure pressure"))]
        conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                           "message": "anchorage sandbox node agent is posting ready status", **ok})
        return {"capacity": self.capacity, "allocatable": self.capacity, "conditions": conditions,
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": self.name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage":
                             "anchorage sandbox node agent", "containerRuntimeVersion": "anchorage-sandbox://0",
                             "kubeletVersion": KUBE_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux",
                             "architecture": "amd64"}}

    async def register(self) -> Obj:
        """Create (or find) the Node and report it Ready."""
        labels = {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "anchorage.dev/node-agent": "simulated"}
        try:
            await self.api.call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                          "metadata": {"name": self.name, "labels": labels}})
        except ApiError as exc:
            if exc.status != 409:
                raise
        await self.api.call("PATCH", f"/api/v1/nodes/{self.name}/status", {"status": self._node_status()}, STRATEGIC)
        return await self.api.call("GET", f"/api/v1/nodes/{self.name}")

    async def _renew_lease(self, node_uid: str) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.name}"
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_SEC,
                "renewTime": _micro(dt.datetime.now(dt.UTC))}
        try:
            await self.api.call("PATCH", path, {"spec": spec}, "application/merge-patch+json")
        except ApiError as exc:
            if exc.status != 404:
                raise
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": node_uid}
            await self.api.call("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "ownerReferences": [owner]}, "spec": spec})

    async def heartbeat(self, node_uid: str) -> None:
        """Renew the Lease every 10 s and re-post the Node's status every minute."""
        beats = 0
        while True:
            try:
                await self._renew_lease(node_uid)
                if beats % (STATUS_SEC // RENEW_SEC) == 0 and beats:
                    await self.api.call("PATCH", f"/api/v1/nodes/{self.name}/status", {"status": self._node_status()},
                                        STRATEGIC)
            except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("heartbeat failed: %s", exc)
            beats += 1
            await asyncio.sleep(RENEW_SEC)

    # ------------------------------------------------------------------ pods
    async def pods(self) -> None:
        """List, then watch, the pods bound to this node; resume after the server ends a watch."""
        selector = {"fieldSelector": f"spec.nodeName={self.name}"}
        version = ""
        while True:
            try:
                if not version:
                    listing = await self.api.call("GET", "/api/v1/pods", params=selector)
                    version = listing["metadata"]["resourceVersion"]
                    for pod in listing.get("items") or []:
                        self.on_pod("ADDED", pod, initial=True)
                async for event in self.api.watch("/api/v1/pods", {**selector, "resourceVersion": version,
                                                                   "allowWatchBookmarks": "true",
                                                                   "timeoutSeconds": "300"}):
                    if event["type"] == "ERROR":
                        version = ""  # 410 Gone: list again
                        break
                    version = event["object"]["metadata"].get("resourceVersion", version)
                    if event["type"] != "BOOKMARK":
                        self.on_pod(event["type"], event["object"])
            except (ApiError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                log.warning("pod watch failed (%s); listing again", exc)
                version = ""
                await asyncio.sleep(1)

    def on_pod(self, kind: str, pod: Obj, *, initial: bool = False) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        terminal = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if kind == "DELETED":
            run = self.runs.get(uid)
            if run is not None:
                run.kill()
            return
        if meta.get("deletionTimestamp"):
            run = self.runs.get(uid)
            if run is not None:
                run.kill()  # the task then removes the pod
            elif uid not in self.tasks:
                self._spawn(uid, self._remove(pod))
            return
        if uid in self.tasks or uid in self.finished or terminal:
            return
        if initial and (pod.get("status") or {}).get("startTime"):
            self._spawn(uid, self._lost(pod))  # it ran here before this agent restarted
            return
        self._spawn(uid, self._run(pod))

    def _spawn(self, uid: str, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks[uid] = task
        task.add_done_callback(lambda _: self.tasks.pop(uid, None))

    def _pod_path(self, pod: Obj) -> str:
        return f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"

    async def _report(self, pod: Obj, status: Obj) -> None:
        try:
            await self.api.call("PATCH", f"{self._pod_path(pod)}/status", {"status": status}, STRATEGIC)
        except ApiError as exc:
            if exc.status == 404:
                run = self.runs.get(pod["metadata"]["uid"])
                if run is not None:
                    run.kill()
            else:
                log.warning("status of pod %s/%s refused: %s", pod["metadata"]["namespace"],
                            pod["metadata"]["name"], exc)

    async def _run(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        run = PodRun(pod, self.workdir / f"{pod['metadata']['namespace']}-{pod['metadata']['name']}", _ApiReferences(
            self.api), lambda status: self._report(pod, status), simulate=self.simulate)
        self.runs[uid] = run
        try:
            await run.run()
        except Exception as exc:  # reported on the pod, as a kubelet reports a container it could not start
            log.exception("pod %s/%s failed on the simulated node", run.ns, run.name)
            await run.fail(f"the simulated node could not run the pod: {exc}")
        finally:
            self.runs.pop(uid, None)
            self.finished.add(uid)
            for group in run.groups.values():
                group.remove()
        if run.killed:
            await self._remove(pod)

    async def _lost(self, pod: Obj) -> None:
        stamp = now()
        gone = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown", "startedAt": stamp,
                               "finishedAt": stamp, "message": "the simulated node restarted; the container is gone"}}
        spec = pod["spec"]
        status: Obj = {"phase": "Failed", "containerStatuses": [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
             "state": gone} for c in spec["containers"]]}
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [
                {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
                 "state": gone} for c in spec["initContainers"]]
        await self._report(pod, status)
        self.finished.add(pod["metadata"]["uid"])

    async def _remove(self, pod: Obj) -> None:
        """The kubelet's last word on a deleted pod: delete it with grace 0 (its uid as precondition)."""
        with contextlib.suppress(ApiError):
            await self.api.call("DELETE", self._pod_path(pod), {
                "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": pod["metadata"]["uid"]}})

    async def run(self) -> None:
        """Register, then serve until cancelled (kills every running pod on the way out)."""
        node = await self.register()
        tasks = [asyncio.create_task(self.heartbeat(node["metadata"]["uid"])), asyncio.create_task(self.pods())]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for run in list(self.runs.values()):
                run.kill()
            await self.api.close()


class _ApiReferences:
    """Secrets and ConfigMaps read through the API (the Node authorizer allows those of the node's pods), and
    ServiceAccount tokens bound to the node's pods (TokenRequest, as a kubelet asks)."""

    def __init__(self, api: Api) -> None:
        self.api = api

    async def token(self, pod: Obj, audience: str | None, seconds: int) -> str:
        meta = pod["metadata"]
        spec: Obj = {"expirationSeconds": max(seconds, 600),
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}}
        if audience:
            spec["audiences"] = [audience]
        account = pod["spec"].get("serviceAccountName") or "default"
        path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token"
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        for wait in (0.2, 0.5, 1, 2, 4, 0):
            try:
                answer = await self.api.call("POST", path, body)
                return str(answer["status"]["token"])
            except ApiError as exc:
                # NodeRestriction checks the pod's binding in the API server's cache, which may lag behind the
                # binding this node saw: "a pod scheduled on a different node" (403) or, for a pod just created,
                # the token's bound pod "not found" (404) for a moment
                if exc.status not in (403, 404) or not wait:
                    raise
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    async def read(self, plural: str, namespace: str, name: str) -> Obj | None:
        try:
            return await self.api.call("GET", f"/api/v1/namespaces/{namespace}/{plural}/{name}")
        except ApiError as exc:
            if exc.status in (403, 404):  # 403: not (yet) referenced by a pod bound here, as the authorizer sees it
                return None
            raise


def load_simulate(spec: str) -> Simulate:
    """``MODULE:FUNCTION`` → the function."""
    module, _, name = spec.partition(":")
    fn: Simulate = getattr(importlib.import_module(module), name)
    return fn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m anchorage_devcluster.simulatednode",
                                     description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", type=Path, required=True, help="authenticates as system:node:NAME")
    parser.add_argument("--name", required=True, help="the Node's name")
    parser.add_argument("--workdir", type=Path, required=True, help="the pods' bookkeeping")
    parser.add_argument("--simulate", required=True,
                        help="MODULE:FUNCTION that stands in for running each pod (e.g. simulated_pods:anchorage_pod)")
    parser.add_argument("--capacity", action="append", default=[], help="RESOURCE=QUANTITY, e.g. cpu=64, pods=250")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    capacity = dict(item.split("=", 1) for item in args.capacity)
    args.workdir.mkdir(parents=True, exist_ok=True)
    agent = SimulatedNode(Api(args.kubeconfig), args.name, workdir=args.workdir, simulate=load_simulate(args.simulate),
                          capacity=capacity)

    async def serve() -> None:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        await agent.run()

    with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
