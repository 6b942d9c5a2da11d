"""The address a trial pod's ``hostAliases`` give the gateway URL's host name (the pod itself has no DNS).

Called by :mod:`anchorage.controller.launching` when it builds a model-calling trial's Job
(:func:`anchorage.runtime.kube.jobs.agent_network`). The gateway URL names a Service (``<svc>.<namespace>.svc...``,
what the chart sets): its ClusterIP, read from the API (the chart grants ``get`` on the gateway's Service). Another
name (a gateway outside the cluster, or a Service the operator may not read) is resolved by the operator itself; an
IP address needs no alias. Answers are kept :data:`TTL` seconds (a Service's ClusterIP does not change while it
exists). A name that cannot be resolved is the platform's failure, never the agent's: :class:`GatewayAddressError`
ends the trial ``InfrastructureFailed`` (``gateway_error``) before anything runs.
"""

from __future__ import annotations

import re
import socket
import threading
import time

from anchorage.controller import kube
from anchorage.errors import AnchorageError
from anchorage.runtime.kube.jobs import OperatorConfig, gateway_host

#: Seconds an answer is reused.
TTL = 300.0
SERVICE_NAME = re.compile(r"^(?P<service>[a-z0-9]([-a-z0-9]*[a-z0-9])?)\.(?P<namespace>[a-z0-9]([-a-z0-9]*[a-z0-9])?)"
                          r"\.svc(\.[a-z0-9.-]+)?\.?$")
_CACHE: dict[str, tuple[float, str]] = {}
_LOCK = threading.Lock()


class GatewayAddressError(AnchorageError):
    """The gateway URL's host name stands for no address a pod can be given."""


def _service_ip(namespace: str, service: str) -> str | None:
    """The ClusterIP of a Service; None when the operator may not read it (403: resolved by name instead)."""
    try:
        found = kube.get_service(namespace, service)
    except kube.ApiError as exc:
        if exc.status == 403:
            return None
        raise
    if found is None:
        raise GatewayAddressError(f"the gateway URL names the Service {service} in namespace {namespace}, which does "
                                  "not exist", hint="install the chart's gateway (gateway.enabled) or fix "
                                  "operator.gateway.url (--gateway-url)")
    address = str((found.get("spec") or {}).get("clusterIP") or "")
    if address in ("", "None"):
        raise GatewayAddressError(f"the gateway Service {namespace}/{service} has no cluster IP (a headless Service): "
                                  "trial pods reach the gateway by one address", hint="give it a ClusterIP")
    return address


def _resolved(host: str) -> str:
    try:
        found = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError as exc:
        raise GatewayAddressError(f"the gateway URL's host {host} cannot be resolved by the operator: {exc}",
                                  hint="fix operator.gateway.url (--gateway-url), or use an IP address") from exc
    return str(found[0][4][0])


def gateway_address(config: OperatorConfig) -> str | None:
    """The IP address the gateway URL's host name stands for (None: the URL has an IP address)."""
    host = gateway_host(config)
    if host is None:
        return None
    now = time.monotonic()
    with _LOCK:
        cached = _CACHE.get(host)
    if cached is not None and now - cached[0] < TTL:
        return cached[1]
    named = SERVICE_NAME.match(host)
    address = _service_ip(named["namespace"], named["service"]) if named else None
    if address is None:
        address = _resolved(host)
    with _LOCK:
        _CACHE[host] = (now, address)
    return address
