"""The few Kubernetes API calls the handlers make, with the error mapping at one place.

Used by the handlers of ``anchorage.controller`` (in worker threads: kopf's for sync handlers,
:func:`in_thread` for the work of the async watch-event handlers).
A 409 on create means "already there" (deterministic names make creation idempotent); 5xx, 429 and
connection errors are retried a few times, then become ``kopf.TemporaryError`` (kopf retries timers
and campaign handlers; for watch-event handlers the next event, the campaign sweep or the watchdog
does); other 4xx are permanent.

The calls go through :class:`Client`, a thin JSON client over one urllib3 connection pool: bodies in
and out are plain dicts (what the watch delivers too). The kubernetes package only loads the
credentials (kubeconfig or in-cluster, with its token refresh; TLS client certificates and a proxy
are honoured). Its generated client's model (de)serialisation was the operator's largest CPU cost in
``bench/kube_operator.py``; the method names here are the kubernetes client's, so reading the code
(and ``tests/charts``'s RBAC derivation) works alike.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import os
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import kopf
import kubernetes
import urllib3

from anchorage.manifests import API_GROUP, API_VERSION

T = TypeVar("T")
Obj = dict[str, Any]


class ApiError(Exception):
    """The API answered an error status; ``message`` is the Status body's message (else the reason)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class Client:
    """The subset of the Kubernetes API the handlers use: plain JSON over one urllib3 pool (thread-safe)."""

    def __init__(self, configuration: kubernetes.client.Configuration) -> None:
        self.configuration = configuration
        self.host = configuration.host.rstrip("/")
        self._cached_token: tuple[float, str | None] | None = None
        kwargs: dict[str, Any] = {"maxsize": 32, "block": False,  # one per worker thread, with room to spare
                                  # Connection-level retries (a keep-alive socket the server closed): every
                                  # call is idempotent (creates take 409 as done, patches are merges).
                                  "retries": urllib3.Retry(total=3, connect=3, read=3, backoff_factor=0.1,
                                                           allowed_methods=None, status_forcelist=())}
        if self.host.startswith("https"):
            kwargs.update(cert_reqs=ssl.CERT_REQUIRED if configuration.verify_ssl else ssl.CERT_NONE,
                          ca_certs=configuration.ssl_ca_cert, cert_file=configuration.cert_file,
                          key_file=configuration.key_file)
            if configuration.assert_hostname is not None:
                kwargs["assert_hostname"] = configuration.assert_hostname
        if configuration.proxy:
            self.pool = urllib3.ProxyManager(configuration.proxy, proxy_headers=configuration.proxy_headers,
                                             **kwargs).connection_from_url(self.host)
        else:
            self.pool = urllib3.connection_from_url(self.host, **kwargs)

    #: How long an Authorization header is reused before the credentials' refresh hook is asked again.
    TOKEN_TTL = 10.0

    def _token(self, fresh: bool = False) -> str | None:
        """The Authorization header's value, refreshed at most every :data:`TOKEN_TTL` s (or when ``fresh``).

        The kubernetes package's refresh hook (expiring exec-plugin and in-cluster tokens) re-applies the
        whole kubeconfig to the configuration on every call, a tenth of the handlers' API-call CPU; a 401
        refreshes at once (:meth:`request`).
        """
        now = time.monotonic()
        cached = self._cached_token
        if fresh or cached is None or now - cached[0] > self.TOKEN_TTL:
            cached = self._cached_token = (now, self.configuration.get_api_key_with_prefix("authorization"))
        return cached[1]

    def _headers(self, content_type: str, fresh: bool = False) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        token = self._token(fresh)
        if token:
            headers["Authorization"] = token
        return headers

    def request(self, method: str, path: str, body: Obj | None = None,
                content_type: str = "application/json", *, answer: bool = True) -> Obj:
        """One call; the decoded JSON answer ({} with ``answer=False``), or :class:`ApiError` for an error status."""
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        response = self.pool.urlopen(method, path, body=data, headers=self._headers(content_type))
        if response.status == 401:  # the token may have expired since it was read: refresh it, once
            response = self.pool.urlopen(method, path, body=data, headers=self._headers(content_type, fresh=True))
        if response.status < 400 and not answer:
            return {}
        try:
            decoded = json.loads(response.data) if response.data else {}
        except ValueError:
            decoded = {}
        return self._checked(response, decoded)

    @staticmethod
    def _checked(response: Any, answer: Any) -> Obj:
        if response.status >= 400:
            message = answer.get("message") if isinstance(answer, dict) else None
            raise ApiError(response.status, str(message or response.reason or "error"))
        return answer if isinstance(answer, dict) else {}

    def _custom(self, group: str, version: str, namespace: str, plural: str) -> str:
        return f"/apis/{group}/{version}/namespaces/{namespace}/{plural}"

    def create_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                        body: Obj) -> Obj:
        return self.request("POST", self._custom(group, version, namespace, plural), body, answer=False)

    def get_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> Obj:
        return self.request("GET", f"{self._custom(group, version, namespace, plural)}/{name}")

    def patch_namespaced_custom_object_status(self, group: str, version: str, namespace: str, plural: str,
                                              name: str, body: Obj) -> Obj:
        return self.request("PATCH", f"{self._custom(group, version, namespace, plural)}/{name}/status", body,
                            "application/merge-patch+json", answer=False)

    def create_namespaced_job(self, namespace: str, body: Obj, *, answer: bool = False) -> Obj:
        return self.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body, answer=answer)

    def read_namespaced_job(self, name: str, namespace: str) -> Obj:
        return self.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")

    def create_namespaced_network_policy(self, namespace: str, body: Obj) -> Obj:
        return self.request("POST", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies", body,
                            answer=False)

    def create_namespaced_secret(self, namespace: str, body: Obj) -> Obj:
        return self.request("POST", f"/api/v1/namespaces/{namespace}/secrets", body, answer=False)


@functools.cache
def _executor() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=int(os.environ.get("ANCHORAGE_WORKERS", "8")),
                                                 thread_name_prefix="anchorage-api")


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` (blocking API and store calls) in the handlers' worker threads.

    The watch-event handlers are async: most events need nothing (a Job that started, a status we
    wrote), and deciding that in the event loop costs far less than a hop to a thread per event.
    """
    return await asyncio.get_running_loop().run_in_executor(_executor(), functools.partial(fn, *args))


@functools.cache
def client() -> Client:
    """One API client for the process (in-cluster config, else the kubeconfig)."""
    configuration = kubernetes.client.Configuration()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        kubernetes.config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return Client(configuration)


def call(fn: Callable[[], T], *, what: str, retries: int = 4) -> T:
    """Run an API call; retry 5xx/429/connection errors a few times, then hand them to kopf."""
    for attempt in range(retries + 1):
        try:
            return fn()
        except ApiError as exc:
            if exc.status < 500 and exc.status != 429:
                raise
            if attempt == retries:
                raise kopf.TemporaryError(f"{what}: API error {exc.status}; retrying", delay=2) from exc
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            if attempt == retries:
                raise kopf.TemporaryError(f"{what}: {exc}; retrying", delay=2) from exc
        time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def create(fn: Callable[[], Any], *, what: str) -> bool:
    """Create an object; False when it already exists (409), True when created now."""
    try:
        call(fn, what=what)
    except ApiError as exc:
        if exc.status == 409:
            return False
        raise kopf.PermanentError(f"{what}: API error {exc.status}: {exc.message}") from exc
    return True


def get_custom(plural: str, namespace: str, name: str) -> Obj | None:
    """One of our custom objects, or None when it does not exist."""
    try:
        return call(lambda: client().get_namespaced_custom_object(API_GROUP, API_VERSION, namespace, plural, name),
                    what=f"get {plural}/{name}")
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def patch_status(plural: str, namespace: str, name: str, status: Obj) -> None:
    """Merge ``status`` into the object's status subresource (404: gone, nothing to do)."""
    try:
        call(lambda: client().patch_namespaced_custom_object_status(
            API_GROUP, API_VERSION, namespace, plural, name, {"status": status}), what=f"patch {plural}/{name}")
    except ApiError as exc:
        if exc.status != 404:
            raise


def create_custom(plural: str, body: Obj) -> bool:
    """Create one of our custom objects; False when it already exists."""
    ns = body["metadata"]["namespace"]
    return create(lambda: client().create_namespaced_custom_object(API_GROUP, API_VERSION, ns, plural, body),
                  what=f"create {plural}/{body['metadata']['name']}")


def create_job(body: Obj) -> bool:
    """Create a Job; False when it already exists."""
    ns = body["metadata"]["namespace"]
    return create(lambda: client().create_namespaced_job(ns, body), what=f"create job/{body['metadata']['name']}")


def create_job_uid(body: Obj) -> str:
    """Create a Job and return its uid (read back when it already exists): for owner references."""
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    created: list[Obj] = []
    if create(lambda: created.append(client().create_namespaced_job(ns, body, answer=True)), what=f"create job/{name}"):
        return str(created[-1]["metadata"]["uid"])
    existing = get_job(ns, name)
    if existing is None:
        raise kopf.TemporaryError(f"job/{name} answered 409 on create but is gone now; retrying", delay=1)
    return str(existing["metadata"]["uid"])


def create_secret(body: Obj) -> bool:
    """Create a Secret; False when it already exists."""
    ns = body["metadata"]["namespace"]
    return create(lambda: client().create_namespaced_secret(ns, body), what=f"create secret/{body['metadata']['name']}")


def ensure_network_policies(policies: list[Obj]) -> None:
    """Create the NetworkPolicies that do not exist yet."""
    for policy in policies:
        ns = policy["metadata"]["namespace"]
        create(functools.partial(client().create_namespaced_network_policy, ns, policy),
               what=f"create networkpolicy/{policy['metadata']['name']}")


_POLICIES_DONE: set[str] = set()
_POLICIES_LOCK = threading.Lock()


def ensure_policies_once(namespace: str, cfg: Any) -> None:
    """Create the trial NetworkPolicies of ``namespace`` the first time a Job goes there."""
    from anchorage.runtime.kubejobs import network_policies

    if namespace in _POLICIES_DONE:
        return
    with _POLICIES_LOCK:
        if namespace not in _POLICIES_DONE:
            ensure_network_policies(network_policies(namespace, cfg))
            _POLICIES_DONE.add(namespace)


def get_job(namespace: str, name: str) -> Obj | None:
    """A Job as a plain dict (camelCase keys, as the API sends it), or None when it does not exist."""
    try:
        return call(lambda: client().read_namespaced_job(name, namespace), what=f"get job/{name}")
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
