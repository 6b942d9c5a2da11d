"""The few Kubernetes API calls the handlers make, with the error mapping at one place.

Used by the handlers of ``anchorage.controller`` (sync handlers, run by kopf in worker threads).
A 409 on create means "already there" (deterministic names make creation idempotent); 5xx and
connection errors become ``kopf.TemporaryError`` so kopf retries; other 4xx are permanent.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import kopf
import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from anchorage.manifests import API_GROUP, API_VERSION

T = TypeVar("T")


@functools.cache
def client() -> kubernetes.client.ApiClient:
    """One API client for the process (in-cluster config, else the kubeconfig)."""
    configuration = kubernetes.client.Configuration()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        kubernetes.config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    # Connection-level retries (a keep-alive socket the server closed): every call we make is
    # idempotent (creates treat 409 as done, patches are merge patches), so all methods may retry.
    configuration.connection_pool_maxsize = 32  # one per worker thread, with room to spare
    configuration.retries = urllib3.Retry(total=3, connect=3, read=3, backoff_factor=0.1, allowed_methods=None)
    return kubernetes.client.ApiClient(configuration)


def custom() -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(client())


def batch() -> kubernetes.client.BatchV1Api:
    return kubernetes.client.BatchV1Api(client())


def networking() -> kubernetes.client.NetworkingV1Api:
    return kubernetes.client.NetworkingV1Api(client())


def call(fn: Callable[[], T], *, what: str, retries: int = 4) -> T:
    """Run an API call; retry 5xx/connection errors a few times, then hand them to kopf."""
    for attempt in range(retries + 1):
        try:
            return fn()
        except ApiException as exc:
            if exc.status and exc.status < 500 and exc.status != 429:
                raise
            if attempt == retries:
                raise kopf.TemporaryError(f"{what}: API error {exc.status}; retrying", delay=2) from exc
        except (OSError, urllib3.exceptions.HTTPError, kubernetes.client.exceptions.OpenApiException) as exc:
            if attempt == retries:
                raise kopf.TemporaryError(f"{what}: {exc}; retrying", delay=2) from exc
        time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _message(exc: ApiException) -> str:
    """The API's own message (the Status body), else the HTTP reason."""
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except ValueError:
        return str(exc.reason)


def create(fn: Callable[[], Any], *, what: str) -> bool:
    """Create an object; False when it already exists (409), True when created now."""
    try:
        call(fn, what=what)
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise kopf.PermanentError(f"{what}: API error {exc.status}: {_message(exc)}") from exc
    return True


def get_custom(plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    """One of our custom objects, or None when it does not exist."""
    try:
        obj: Any = call(lambda: custom().get_namespaced_custom_object(
            API_GROUP, API_VERSION, namespace, plural, name), what=f"get {plural}/{name}")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(obj)


def patch_status(plural: str, namespace: str, name: str, status: dict[str, Any]) -> None:
    """Merge ``status`` into the object's status subresource (404: gone, nothing to do)."""
    try:
        call(lambda: custom().patch_namespaced_custom_object_status(
            API_GROUP, API_VERSION, namespace, plural, name, {"status": status}), what=f"patch {plural}/{name}")
    except ApiException as exc:
        if exc.status != 404:
            raise


def create_custom(plural: str, body: dict[str, Any]) -> bool:
    """Create one of our custom objects; False when it already exists."""
    ns = body["metadata"]["namespace"]
    return create(lambda: custom().create_namespaced_custom_object(API_GROUP, API_VERSION, ns, plural, body),
                  what=f"create {plural}/{body['metadata']['name']}")


def create_job(body: dict[str, Any]) -> bool:
    """Create a Job; False when it already exists."""
    ns = body["metadata"]["namespace"]
    return create(lambda: batch().create_namespaced_job(ns, body),  # type: ignore[arg-type]
                  what=f"create job/{body['metadata']['name']}")


def ensure_network_policies(policies: list[dict[str, Any]]) -> None:
    """Create the NetworkPolicies that do not exist yet."""
    for policy in policies:
        ns = policy["metadata"]["namespace"]
        create(functools.partial(networking().create_namespaced_network_policy, ns, policy),  # type: ignore[arg-type]
               what=f"create networkpolicy/{policy['metadata']['name']}")


_POLICIES_DONE: set[str] = set()


def ensure_policies_once(namespace: str, cfg: Any) -> None:
    """Create the trial NetworkPolicies of ``namespace`` the first time a Job goes there."""
    from anchorage.runtime.kubejobs import network_policies

    if namespace not in _POLICIES_DONE:
        ensure_network_policies(network_policies(namespace, cfg))
        _POLICIES_DONE.add(namespace)


def get_job(namespace: str, name: str) -> dict[str, Any] | None:
    """A Job as a plain dict (camelCase keys, as the API sends it), or None when it does not exist."""
    try:
        job = call(lambda: batch().read_namespaced_job(name, namespace), what=f"get job/{name}")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    result: dict[str, Any] = client().sanitize_for_serialization(job)  # type: ignore[no-untyped-call]
    return result
