"""The few Kubernetes API calls the handlers make, with the error mapping at one place.

Used by the handlers of ``anchorage.controller`` (in worker threads: kopf's for sync handlers,
:func:`in_thread` for the work of the async watch-event handlers).
A 409 on create means "already there" (deterministic names make creation idempotent); 5xx, 429 and
connection errors are retried by :class:`Client` (the one retry layer), then become
``kopf.TemporaryError`` (kopf retries timers and campaign handlers; for watch-event handlers the next
event, the campaign sweep or the watchdog does); other 4xx are permanent.

The calls go through :class:`Client`, a thin JSON client (orjson) over keep-alive HTTP/1.1 connections
(:mod:`anchorage.controller.connections`: sockets and httptools, no urllib3): bodies in and out are plain dicts
(what the watch delivers too). The kubernetes package only loads the
credentials (kubeconfig or in-cluster); the client uses them as that package stores them: the bearer
token under ``api_key["BearerToken"]`` (``authorization`` in older versions) refreshed through its hook
(exec plugins, in-cluster token files), a kubeconfig ``tokenFile`` re-read as it rotates (the user the package chose
from a merged ``KUBECONFIG``, the file relative to the kubeconfig that named it), client certificates,
``tls-server-name``, ``proxy-url`` (an ``http://`` or ``https://`` proxy, whose certificate is checked like the API
server's, as the package and client-go do; ``socks`` is refused when the client is made) and ``NO_PROXY``, a path
prefix in the server URL. docs/design-notes.md ("Operator", *The API client beside the kubernetes package*) compares
the two.
Every write carries ``fieldValidation=Strict`` (an unknown or misplaced field is an error, never pruned
silently); the server's ``Warning`` headers are logged. Its generated client's model (de)serialisation
was the operator's largest CPU cost in ``bench/kube_operator.py``; the method names here are the
kubernetes client's, so reading the code (and ``tests/charts``'s RBAC derivation) works alike.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import functools
import logging
import os
import re
import ssl
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import kopf
import kubernetes
import orjson
import yaml
from kubernetes.client.rest import should_bypass_proxies

from anchorage.controller import connections
from anchorage.manifests import API_GROUP, API_VERSION

T = TypeVar("T")
Obj = dict[str, Any]
log = logging.getLogger("anchorage.kube")
RETRIED = frozenset({429, 500, 502, 503, 504})
USER_AGENT = "anchorage-operator"
_WARNING = re.compile(r'^\d{3} \S+ "((?:[^"\\]|\\.)*)"')


class ApiError(Exception):
    """The API answered an error status; ``message`` is the Status body's message (else the reason).

    ``retry_after``: the seconds the server asked to wait (``Retry-After``), when it did.
    """

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


#: Kueue's API group and version, and its visibility API's group (``controller.queueing``).
KUEUE_GROUP, KUEUE_API, KUEUE_VISIBILITY = "kueue.x-k8s.io", "v1beta2", "visibility.kueue.x-k8s.io"


def _retry_after(response: connections.Response) -> float | None:
    value = response.header("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class Client:
    """The subset of the Kubernetes API the handlers use: plain JSON over one pool of connections (thread-safe).

    One retry layer (:meth:`request`): connection errors and 429/5xx are tried :data:`ATTEMPTS` times in
    all, waiting what ``Retry-After`` says (else a short backoff), never longer than :data:`RETRY_BUDGET`
    seconds in all; then the error goes to the caller. The connections retry nothing themselves (but replace an
    idle connection the server closed). Every call has a connect and a read timeout (:data:`CONNECT_TIMEOUT`,
    :data:`READ_TIMEOUT`), so a hung server cannot hold a worker thread.
    """

    #: How long an Authorization header is reused before the credentials are asked again.
    TOKEN_TTL = 10.0
    ATTEMPTS = 4
    RETRY_BUDGET = 20.0
    #: Seconds to connect, and to wait for an answer (the read timeout, between two reads).
    CONNECT_TIMEOUT, READ_TIMEOUT = 5.0, 30.0

    def __init__(self, configuration: kubernetes.client.Configuration, *, token_file: Path | None = None) -> None:
        self.configuration = configuration
        self.token_file = token_file
        parts = urllib.parse.urlsplit(configuration.host.rstrip("/"))
        self.host = f"{parts.scheme}://{parts.netloc}"
        self.prefix = parts.path.rstrip("/")  # a server URL may carry a path (an API proxy's prefix)
        self._cached_token: tuple[float, str | None] | None = None
        self._warned: set[str] = set()
        proxy = self.proxy()
        tls = self.tls_context()
        self.connections = connections.Connections(
            self.host, tls=tls if self.host.startswith("https://") else None, server_hostname=self.server_hostname(),
            proxy=connections.Proxy.from_url(proxy, configuration.proxy_headers, tls=tls) if proxy else None,
            connect_timeout=self.CONNECT_TIMEOUT)

    def close(self) -> None:
        """Close the idle connections (they are also closed when the client goes)."""
        self.connections.close()

    def ssl_context(self) -> ssl.SSLContext | None:
        """The configuration's TLS settings as an :class:`ssl.SSLContext` (None for plain HTTP): CA file or data,
        client certificate, verification on or off. The client's connections use it, and so does the async side
        (:mod:`anchorage.controller.watching`'s aiohttp session), so both connect alike."""
        return self.tls_context() if self.host.startswith("https://") else None

    def tls_context(self) -> ssl.SSLContext:
        """The configuration's TLS settings, whatever the server's scheme: what an ``https://`` proxy's certificate
        is checked with too (as urllib3 under the kubernetes package and client-go do)."""
        cfg = self.configuration
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert,
                                             cadata=getattr(cfg, "ca_cert_data", None) or None)
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file)
        if not cfg.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif cfg.assert_hostname is False:
            context.check_hostname = False
        return context

    def server_hostname(self) -> str | None:
        """The name the server's certificate is checked against when it is not the URL's host
        (``tls-server-name``; ``assert_hostname`` as the kubernetes package stores an override)."""
        cfg = self.configuration
        name = cfg.tls_server_name or (cfg.assert_hostname if isinstance(cfg.assert_hostname, str) else None)
        return str(name) if name else None

    def proxy(self) -> str | None:
        """The proxy URL to reach the server through (None: direct, also when ``NO_PROXY`` names the server)."""
        cfg = self.configuration
        if cfg.proxy and not should_bypass_proxies(self.host, cfg.no_proxy or ""):
            return str(cfg.proxy)
        return None

    def authorization(self, fresh: bool = False) -> str | None:
        """The ``Authorization`` header's value (see :meth:`_token`); ``fresh`` after a 401."""
        return self._token(fresh)

    def _read_token(self) -> str | None:
        if self.token_file is not None:
            text = self.token_file.read_text().strip()
            return f"Bearer {text}" if text else None
        token = self.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            return str(token)
        if self.configuration.username:
            return str(self.configuration.get_basic_auth_token())
        return None

    def _token(self, fresh: bool = False) -> str | None:
        """The Authorization header's value, read again at most every :data:`TOKEN_TTL` s (or when ``fresh``).

        The kubernetes package's refresh hook (expiring exec-plugin and in-cluster tokens) re-applies the
        whole kubeconfig to the configuration on every call, a tenth of the handlers' API-call CPU; a 401
        reads the credentials again at once (:meth:`request`).
        """
        now = time.monotonic()
        cached = self._cached_token
        if fresh or cached is None or now - cached[0] > self.TOKEN_TTL:
            cached = self._cached_token = (now, self._read_token())
        return cached[1]

    def _headers(self, content_type: str | None, fresh: bool = False) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if content_type is not None:
            headers["Content-Type"] = content_type
        token = self._token(fresh)
        if token:
            headers["Authorization"] = token
        return headers

    def _warnings(self, method: str, path: str, response: connections.Response) -> None:
        for warning in response.header_values("warning"):
            quoted = _WARNING.match(warning)  # 299 - "text with \"escapes\""
            text = re.sub(r"\\(.)", r"\1", quoted.group(1)) if quoted else warning
            if text not in self._warned and len(self._warned) < 1000:
                self._warned.add(text)
                log.warning("the API server warns about %s %s: %s", method, path.split("?")[0], text)

    def _send(self, method: str, url: str, data: bytes | None, content_type: str) -> connections.Response:
        kind = content_type if data is not None else None
        response = self.connections.request(method, url, self._headers(kind), data, self.READ_TIMEOUT)
        if response.status == 401:  # the token may have expired since it was read: read it again, once
            response = self.connections.request(method, url, self._headers(kind, fresh=True), data, self.READ_TIMEOUT)
        return response

    def request(self, method: str, path: str, body: Obj | list[Obj] | None = None,
                content_type: str = "application/json", *, answer: bool = True) -> Obj:
        """One call; the decoded JSON answer ({} with ``answer=False``), or :class:`ApiError` for an error status.

        Connection errors that outlast the retries are raised as they are (``OSError``s).
        """
        data = orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS) if body is not None else None  # keys as json.dumps
        url = self.prefix + path
        if method in ("POST", "PUT", "PATCH"):
            url += ("&" if "?" in url else "?") + "fieldValidation=Strict"
        deadline = time.monotonic() + self.RETRY_BUDGET
        for attempt in range(1, self.ATTEMPTS + 1):
            wait = min(0.2 * 2 ** attempt, 5.0)
            try:
                response = self._send(method, url, data, content_type)
            except OSError:
                if attempt == self.ATTEMPTS or time.monotonic() + wait > deadline:
                    raise
                time.sleep(wait)
                continue
            self._warnings(method, path, response)
            if response.status in RETRIED and attempt < self.ATTEMPTS:
                asked = _retry_after(response)
                wait = asked if asked is not None else wait
                if time.monotonic() + wait <= deadline:
                    time.sleep(wait)
                    continue
            break
        if response.status < 400 and not answer:
            return {}
        try:
            decoded = orjson.loads(response.data) if response.data else {}
        except ValueError:
            decoded = {}
        return self._checked(response, decoded)

    @staticmethod
    def _checked(response: connections.Response, answer: Any) -> Obj:
        if response.status >= 400:
            message = answer.get("message") if isinstance(answer, dict) else None
            raise ApiError(response.status, str(message or response.reason or "error"), _retry_after(response))
        return answer if isinstance(answer, dict) else {}

    def _custom(self, group: str, version: str, namespace: str, plural: str) -> str:
        return f"/apis/{group}/{version}/namespaces/{namespace}/{plural}"

    def create_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                        body: Obj, *, answer: bool = False) -> Obj:
        return self.request("POST", self._custom(group, version, namespace, plural), body, answer=answer)

    def get_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> Obj:
        return self.request("GET", f"{self._custom(group, version, namespace, plural)}/{name}")

    def patch_namespaced_custom_object_status(self, group: str, version: str, namespace: str, plural: str,
                                              name: str, body: Obj) -> Obj:
        return self.request("PATCH", f"{self._custom(group, version, namespace, plural)}/{name}/status", body,
                            "application/merge-patch+json", answer=False)

    def create_namespaced_job(self, namespace: str, body: Obj, *, answer: bool = False) -> Obj:
        return self.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body, answer=answer)

    def patch_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str,
                                       body: Obj | list[Obj], content_type: str, *, answer: bool = False) -> Obj:
        return self.request("PATCH", f"{self._custom(group, version, namespace, plural)}/{name}", body, content_type,
                            answer=answer)

    def read_namespaced_job(self, name: str, namespace: str) -> Obj:
        return self.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")

    def list_namespaced_job(self, namespace: str, label_selector: str) -> Obj:
        query = urllib.parse.urlencode({"labelSelector": label_selector})
        return self.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs?{query}")

    def delete_namespaced_job(self, name: str, namespace: str, body: Obj) -> Obj:
        return self.request("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}", body, answer=False)

    def delete_namespaced_pod(self, name: str, namespace: str, body: Obj) -> Obj:
        return self.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body, answer=False)

    def get_api_resources(self, group: str, version: str) -> Obj:
        """An API group version's discovery document (every authenticated user may read it)."""
        return self.request("GET", f"/apis/{group}/{version}")

    def read_namespaced_local_queue(self, name: str, namespace: str) -> Obj:
        """A Kueue LocalQueue."""
        return self.request("GET", f"/apis/{KUEUE_GROUP}/{KUEUE_API}/namespaces/{namespace}/localqueues/{name}")

    def read_namespaced_local_queue_pending_workloads(self, name: str, namespace: str) -> Obj:
        """A LocalQueue's pending workloads with their positions (Kueue's visibility API)."""
        return self.request("GET", f"/apis/{KUEUE_VISIBILITY}/{KUEUE_API}/namespaces/{namespace}/localqueues/{name}"
                                   "/pendingworkloads")

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Obj:
        query = urllib.parse.urlencode({"labelSelector": label_selector})
        return self.request("GET", f"/api/v1/namespaces/{namespace}/pods?{query}")

    def create_namespaced_network_policy(self, namespace: str, body: Obj) -> Obj:
        return self.request("POST", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies", body,
                            answer=False)

    def read_namespaced_network_policy(self, name: str, namespace: str) -> Obj:
        return self.request("GET", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/{name}")

    def replace_namespaced_network_policy(self, name: str, namespace: str, body: Obj) -> Obj:
        return self.request("PUT", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/{name}", body,
                            answer=False)

    def list_namespaced_network_policy(self, namespace: str, label_selector: str) -> Obj:
        query = urllib.parse.urlencode({"labelSelector": label_selector})
        return self.request("GET", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies?{query}")

    def delete_namespaced_network_policy(self, name: str, namespace: str) -> Obj:
        return self.request("DELETE", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/{name}",
                            answer=False)

    def read_namespaced_service(self, name: str, namespace: str) -> Obj:
        return self.request("GET", f"/api/v1/namespaces/{namespace}/services/{name}")

    def patch_namespaced_pod(self, name: str, namespace: str, body: Obj) -> Obj:
        return self.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", body,
                            "application/merge-patch+json", answer=False)

    def create_namespaced_pod(self, namespace: str, body: Obj) -> Obj:
        return self.request("POST", f"/api/v1/namespaces/{namespace}/pods", body, answer=False)

    def read_namespaced_pod(self, name: str, namespace: str) -> Obj:
        return self.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")

    def list_namespaced_event(self, namespace: str, field_selector: str) -> Obj:
        query = urllib.parse.urlencode({"fieldSelector": field_selector})
        return self.request("GET", f"/api/v1/namespaces/{namespace}/events?{query}")

    def create_namespaced_secret(self, namespace: str, body: Obj) -> Obj:
        return self.request("POST", f"/api/v1/namespaces/{namespace}/secrets", body, answer=False)

    def create_namespaced_event(self, namespace: str, body: Obj) -> Obj:
        return self.request("POST", f"/api/v1/namespaces/{namespace}/events", body, answer=False)


def kubeconfig_token_file(path: str | None = None) -> Path | None:
    """The ``tokenFile`` of the kubeconfig's current user, if it names one (the kubernetes package reads it once;
    a rotated token must be read again).

    ``path``: the kubeconfig (files joined by ``os.pathsep``, as ``KUBECONFIG``; default ``$KUBECONFIG``, else
    ``~/.kube/config``), merged by the kubernetes package's own merger so the user is the one it loaded: the first
    definition of each name wins, the last ``current-context`` set. The file is relative to the kubeconfig that defines
    the user. None when the user has a ``token`` too (the package sends that one) or none of this resolves.
    """
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigMerger

    paths = path or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    try:
        config = KubeConfigMerger(paths).config  # type: ignore[no-untyped-call]
        if config is None:
            return None
        context = config["contexts"].get_with_name(config["current-context"])["context"]
        user = config["users"].get_with_name(context["user"])
        fields = user["user"].value if user.safe_get("user") is not None else {}
    except (ConfigException, KeyError, TypeError, AttributeError, OSError, yaml.YAMLError):
        return None
    token_file = fields.get("tokenFile") if isinstance(fields, dict) else None
    if not isinstance(token_file, str) or not token_file or fields.get("token"):
        return None
    return (Path(user.path or ".").parent / token_file).resolve()


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
        return Client(configuration)
    paths = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")  # one reading for both
    kubernetes.config.load_kube_config(config_file=paths,  # type: ignore[no-untyped-call]
                                       client_configuration=configuration)
    return Client(configuration, token_file=kubeconfig_token_file(paths))


def call(fn: Callable[[], T], *, what: str) -> T:
    """Run an API call (the client has retried what is worth retrying); 5xx/429/connection errors go to kopf
    as temporary, after the server's ``Retry-After`` when it gave one."""
    try:
        return fn()
    except ApiError as exc:
        if exc.status < 500 and exc.status != 429:
            raise
        raise kopf.TemporaryError(f"{what}: API error {exc.status}: {exc.message}; retrying",
                                  delay=max(2.0, exc.retry_after or 0)) from exc
    except OSError as exc:
        raise kopf.TemporaryError(f"{what}: {exc}; retrying", delay=2) from exc


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


def patch_status(plural: str, namespace: str, name: str, status: Obj, *, resource_version: str | None = None) -> bool:
    """Merge ``status`` into the object's status subresource; True when written.

    With ``resource_version`` the patch applies only to that version of the object (optimistic concurrency:
    the caller decided on that version); a 409 Conflict then means the object changed since, and returns
    False (its newer version comes as a watch event, where the caller decides again). 404: gone, False.
    """
    body: Obj = {"status": status}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    try:
        call(lambda: client().patch_namespaced_custom_object_status(
            API_GROUP, API_VERSION, namespace, plural, name, body), what=f"patch {plural}/{name}")
    except ApiError as exc:
        if exc.status in (404, 409):
            return False
        raise
    return True


#: Who posts the operator's Events (``kubectl describe`` shows it as the events' source).
EVENT_SOURCE = "anchorage-operator"


def post_event(obj: Obj, kind: str, reason: str, message: str) -> None:
    """Post a Kubernetes Event (``kind``: ``Normal`` or ``Warning``) about ``obj``; best effort (logged on failure).

    ``obj`` is the object as the API gave it (``apiVersion``, ``kind``, ``metadata`` with ``uid``). Shown by
    ``kubectl describe`` and ``kubectl get events``.
    """
    meta = obj["metadata"]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body = {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name'][:200]}.{time.time_ns():x}", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": obj.get("apiVersion", f"{API_GROUP}/{API_VERSION}"),
                               "kind": obj.get("kind", ""), "name": meta["name"], "namespace": meta["namespace"],
                               "uid": meta.get("uid", "")},
            "type": kind, "reason": reason, "message": message[:1024], "source": {"component": EVENT_SOURCE},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
    try:
        call(lambda: client().create_namespaced_event(meta["namespace"], body), what=f"event {reason}")
    except (ApiError, kopf.TemporaryError) as exc:
        log.warning("could not post the event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], exc)


def create_custom(plural: str, body: Obj) -> bool:
    """Create one of our custom objects; False when it already exists."""
    ns = body["metadata"]["namespace"]
    return create(lambda: client().create_namespaced_custom_object(API_GROUP, API_VERSION, ns, plural, body),
                  what=f"create {plural}/{body['metadata']['name']}")


def create_custom_answer(plural: str, body: Obj) -> Obj | None:
    """Create one of our custom objects; the object as created (uid, resourceVersion), None when it already existed."""
    ns = body["metadata"]["namespace"]
    created: list[Obj] = []
    if create(lambda: created.append(client().create_namespaced_custom_object(API_GROUP, API_VERSION, ns, plural, body,
                                                                              answer=True)),
              what=f"create {plural}/{body['metadata']['name']}"):
        return created[-1]
    return None


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


def _missing_ok(fn: Callable[[], T], *, what: str) -> T | None:
    """``call(fn)``; None when the object is not there (404)."""
    try:
        return call(fn, what=what)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def get_network_policy(namespace: str, name: str) -> Obj | None:
    """A NetworkPolicy, or None when it does not exist."""
    return _missing_ok(lambda: client().read_namespaced_network_policy(name, namespace),
                       what=f"get networkpolicy/{name}")


def replace_network_policy(policy: Obj) -> bool:
    """Replace a NetworkPolicy (``metadata.resourceVersion`` as read: optimistic); False when it changed or went
    since it was read (its next event brings it back here)."""
    meta = policy["metadata"]
    try:
        call(lambda: client().replace_namespaced_network_policy(meta["name"], meta["namespace"], policy),
             what=f"replace networkpolicy/{meta['name']}")
    except ApiError as exc:
        if exc.status in (404, 409):
            return False
        raise
    return True


def list_network_policies(namespace: str, selector: str) -> list[Obj]:
    """The NetworkPolicies of ``namespace`` matching the label ``selector``."""
    answer = call(lambda: client().list_namespaced_network_policy(namespace, selector),
                  what=f"list networkpolicies in {namespace}")
    return [p for p in answer.get("items") or [] if isinstance(p, dict)]


def delete_network_policy(namespace: str, name: str) -> None:
    """Delete a NetworkPolicy (gone already: nothing to do)."""
    _missing_ok(lambda: client().delete_namespaced_network_policy(name, namespace), what=f"delete networkpolicy/{name}")


def get_service(namespace: str, name: str) -> Obj | None:
    """A Service, or None when it does not exist."""
    return _missing_ok(lambda: client().read_namespaced_service(name, namespace), what=f"get service/{name}")


def label_pod(namespace: str, name: str, labels: dict[str, str]) -> bool:
    """Merge ``labels`` into a pod's; False when the pod is gone."""
    return _missing_ok(lambda: client().patch_namespaced_pod(name, namespace, {"metadata": {"labels": labels}}),
                       what=f"label pod/{name}") is not None


def create_pod(body: Obj) -> bool:
    """Create a pod; False when it already exists."""
    ns = body["metadata"]["namespace"]
    return create(lambda: client().create_namespaced_pod(ns, body), what=f"create pod/{body['metadata']['name']}")


def get_pod(namespace: str, name: str) -> Obj | None:
    """A pod, or None when it does not exist."""
    return _missing_ok(lambda: client().read_namespaced_pod(name, namespace), what=f"get pod/{name}")


def events_of(namespace: str, kind: str, uid: str) -> list[Obj]:
    """The Events about one object (``involvedObject``), oldest first."""
    answer = call(lambda: client().list_namespaced_event(namespace, f"involvedObject.kind={kind},"
                                                                    f"involvedObject.uid={uid}"),
                  what=f"list the events of {kind.lower()} {uid}")
    items = [e for e in answer.get("items") or [] if isinstance(e, dict)]
    return sorted(items, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))


def api_resources(group: str, version: str) -> set[str] | None:
    """The resources (plurals) an API group version serves; None when the server does not serve it."""
    try:
        found = call(lambda: client().get_api_resources(group, version), what=f"discover {group}/{version}")
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return {str(r.get("name")) for r in found.get("resources") or [] if isinstance(r, dict)}


def get_local_queue(namespace: str, name: str) -> Obj | None:
    """A Kueue LocalQueue, or None when it does not exist (a 403 — no RBAC for it — is raised as ApiError)."""
    try:
        return call(lambda: client().read_namespaced_local_queue(name, namespace), what=f"get localqueue/{name}")
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def pending_workloads(namespace: str, queue: str) -> list[Obj] | None:
    """A LocalQueue's pending workloads as Kueue's visibility API lists them (their positions); None when the API
    cannot answer (not served, not reachable, not allowed)."""
    try:
        found = call(lambda: client().read_namespaced_local_queue_pending_workloads(queue, namespace),
                     what=f"pending workloads of localqueue/{queue}")
    except (ApiError, kopf.TemporaryError) as exc:
        log.debug("Kueue's visibility API did not answer for %s/%s: %s", namespace, queue, exc)
        return None
    return [w for w in found.get("items") or [] if isinstance(w, dict)]


def get_job(namespace: str, name: str) -> Obj | None:
    """A Job as a plain dict (camelCase keys, as the API sends it), or None when it does not exist."""
    try:
        return call(lambda: client().read_namespaced_job(name, namespace), what=f"get job/{name}")
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def list_jobs(namespace: str, selector: str) -> list[Obj]:
    """The Jobs of ``namespace`` matching the label ``selector``, as the API sends them."""
    answer = call(lambda: client().list_namespaced_job(namespace, selector), what=f"list jobs {selector}")
    items = answer.get("items")
    return [j for j in items if isinstance(j, dict)] if isinstance(items, list) else []


def delete_job(namespace: str, name: str, uid: str | None = None) -> bool:
    """Delete a Job now (propagationPolicy ``Background``: the Job goes at once, the garbage collector takes its pods
    and its token Secret); with ``uid`` only that Job (a precondition). False when it is gone already."""
    body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    if uid:
        body["preconditions"] = {"uid": uid}
    try:
        call(lambda: client().delete_namespaced_job(name, namespace, body), what=f"delete job/{name}")
    except ApiError as exc:
        if exc.status in (404, 409):  # gone, or another Job of that name now
            return False
        raise kopf.PermanentError(f"delete job/{name}: API error {exc.status}: {exc.message}") from exc
    return True


def delete_pod(namespace: str, name: str, grace_seconds: int = 0) -> bool:
    """Delete a pod with a grace period of ``grace_seconds`` (SIGTERM, then SIGKILL that much later; 0: at once);
    False when it is gone already."""
    body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace_seconds}
    try:
        call(lambda: client().delete_namespaced_pod(name, namespace, body), what=f"delete pod/{name}")
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise kopf.PermanentError(f"delete pod/{name}: API error {exc.status}: {exc.message}") from exc
    return True


def patch_custom(plural: str, namespace: str, name: str, body: Obj | list[Obj], *, json_patch: bool = False
                 ) -> Obj | None:
    """Patch one of our custom objects (not its status): a merge patch, or with ``json_patch`` a JSON patch (its
    ``test`` operations make it conditional). The object as patched; None when it is gone (404) or the patch's
    precondition failed (409 on a stale ``resourceVersion``, 422 on a failed ``test``)."""
    kind = "application/json-patch+json" if json_patch else "application/merge-patch+json"
    try:
        return call(lambda: client().patch_namespaced_custom_object(API_GROUP, API_VERSION, namespace, plural, name,
                                                                    body, kind, answer=True),
                    what=f"patch {plural}/{name}")
    except ApiError as exc:
        if exc.status in (404, 409, 422):
            return None
        raise


JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def job_pods(namespace: str, job: str) -> list[Obj]:
    """The pods of Job ``job`` (its controller's ``batch.kubernetes.io/job-name`` label), as the API sends them.

    [] when they cannot be read for good (gone after the Job's TTL; 403: the operator's Role lacks ``list`` on
    pods — said once in the log); a 5xx or a lost connection is kopf's to retry, like every call."""
    try:
        answer = call(lambda: client().list_namespaced_pod(namespace, f"{JOB_NAME_LABEL}={job}"),
                      what=f"list the pods of job/{job}")
    except ApiError as exc:
        if exc.status == 403 and "pods" not in _FORBIDDEN_SAID:
            _FORBIDDEN_SAID.add("pods")
            log.warning("the operator cannot list pods in %s (%s): trials' exit codes are unknown; grant list on "
                        "pods (the Helm chart's trials Role does)", namespace, exc.message)
        return []
    items = answer.get("items")
    return [p for p in items if isinstance(p, dict)] if isinstance(items, list) else []


_FORBIDDEN_SAID: set[str] = set()
