"""The gateway's front door: what one client or one trial may hold of the model API, and how refusals are said.

Used by the model API's server (:mod:`anchorage.gateway.http`, :mod:`anchorage.gateway.listeners`) with the limits of
:class:`~anchorage.gateway.gatewayconfig.FrontDoorConfig`: a listener asks :meth:`Doorkeeper.may_accept` before it accepts
(past a cap it stops accepting; the kernel's backlog holds the rest), a connection is counted against its *client*
(one trial's socket, one remote address, one peer uid) from accept to close and against the *token* it presented
(:meth:`Doorkeeper.bind`), and a request body's bytes are reserved against its trial and the whole gateway before
they are read (:meth:`Doorkeeper.reserve`), released when its answer is done.

Every refusal goes through :meth:`Doorkeeper.refused`: counted in ``anchorage_gateway_refusals_total{reason}`` (one
of :data:`REASONS`: bounded labels) and logged once per (reason, offender) — an agent that opens 20,000
connections is one log line, not 20,000 (a bounded memory of whom it said; past it, a new offender is logged
again). ``anchorage_gateway_connections`` and ``anchorage_gateway_inflight_bytes`` show what is held now.
"""

from __future__ import annotations

import logging
import resource
import weakref
from collections import defaultdict

from anchorage import metrics
from anchorage.gateway.gatewayconfig import FrontDoorConfig

log = logging.getLogger("anchorage.gateway")

#: Why a connection or a request was refused (the ``reason`` label; the gateway's handlers add theirs:
#: ``budget_exceeded``, ``rate_limited``, ``websocket``).
REASONS = frozenset({
    "unauthorized",  # no token, or a forged, expired or revoked one
    "wrong_socket",  # another trial's token on a trial's own socket
    "head_timeout", "body_timeout",  # a request's head or body not complete in time (slow clients)
    "head_too_large", "body_too_large", "malformed",
    "connections", "client_connections", "token_connections",  # connection caps: all, one client, one token
    "inflight_bytes", "token_inflight_bytes",  # request bodies held at once: all, one trial
    "descriptors",  # accept failed for want of descriptors (EMFILE/ENFILE): should never happen under the caps
})
#: (reason, offender) pairs logged; past this many the memory starts again (an offender may be said twice).
SAID_KEPT = 10_000
#: Descriptors left to the rest of the process (journal, upstream connections, the engine's trials) at the least.
RESERVED_DESCRIPTORS = 256

_KEEPERS: weakref.WeakSet[Doorkeeper] = weakref.WeakSet()


def _open_connections() -> float:
    return float(sum(keeper.connections for keeper in list(_KEEPERS)))


def _inflight_bytes() -> float:
    return float(sum(keeper.inflight for keeper in list(_KEEPERS)))


metrics.GATEWAY_CONNECTIONS.set_function(_open_connections)
metrics.GATEWAY_INFLIGHT_BYTES.set_function(_inflight_bytes)


def descriptor_room(wanted: int) -> int:
    """How many connections this process can hold: ``wanted``, or fewer when its descriptor limit is lower.

    Raises the soft ``RLIMIT_NOFILE`` to the hard one first (what a server may do for itself), then leaves a quarter
    of it (at least :data:`RESERVED_DESCRIPTORS`) to everything else the process opens.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    room = max(16, soft - max(RESERVED_DESCRIPTORS, soft // 4))
    if room < wanted:
        log.warning("the descriptor limit (RLIMIT_NOFILE %d) leaves room for %d gateway connections, not the %d "
                    "configured: capped at %d (raise the limit, e.g. ulimit -n, to allow more)", soft, room, wanted,
                    room)
    return min(wanted, room)


class Doorkeeper:
    """The counts behind the caps of one gateway (all calls from its event loop's thread)."""

    def __init__(self, limits: FrontDoorConfig) -> None:
        self.limits = limits
        self.max_connections = descriptor_room(limits.max_connections)
        self.connections = 0
        self.inflight = 0
        self._clients: defaultdict[str, int] = defaultdict(int)
        self._tokens: defaultdict[str, int] = defaultdict(int)
        self._inflight: defaultdict[str, int] = defaultdict(int)
        self._said: set[tuple[str, str]] = set()
        _KEEPERS.add(self)

    # ----- connections ------------------------------------------------------------------------------

    def may_accept(self, client: str | None) -> bool:
        """Whether a listener may accept one more connection (``client``: a listener that serves one client only,
        e.g. a trial's socket, names it; None for a listener whose clients are told apart after accept)."""
        if self.connections >= self.max_connections:
            return False
        return client is None or self._clients.get(client, 0) < self.limits.max_connections_per_client

    def opened(self, client: str) -> bool:
        """Count an accepted connection of ``client``; False (nothing counted) when that client is at its cap."""
        if self._clients.get(client, 0) >= self.limits.max_connections_per_client:
            return False
        self._clients[client] += 1
        self.connections += 1
        return True

    def closed(self, client: str, token: str | None) -> None:
        """A connection counted by :meth:`opened` (and bound to ``token``'s trial, if it was) ended."""
        self.connections -= 1
        self._clients[client] -= 1
        self._forget(self._clients, client)
        if token is not None:
            self.unbind(token)

    def bind(self, token: str) -> bool:
        """Count a connection against the trial whose token it presented; False when that trial is at its cap."""
        if self._tokens.get(token, 0) >= self.limits.max_connections_per_token:
            return False
        self._tokens[token] += 1
        return True

    def unbind(self, token: str) -> None:
        self._tokens[token] -= 1
        self._forget(self._tokens, token)

    # ----- request bodies in flight -----------------------------------------------------------------

    def reserve(self, token: str | None, size: int) -> str | None:
        """Reserve ``size`` bytes of request body for ``token``'s trial; None when done, else the refusal's reason."""
        if token is not None and self._inflight.get(token, 0) + size > self.limits.max_inflight_bytes_per_token:
            return "token_inflight_bytes"
        if self.inflight + size > self.limits.max_inflight_bytes:
            return "inflight_bytes"
        if token is not None:
            self._inflight[token] += size
        self.inflight += size
        return None

    def release(self, token: str | None, size: int) -> None:
        self.inflight -= size
        if token is not None:
            self._inflight[token] -= size
            self._forget(self._inflight, token)

    @staticmethod
    def _forget(counts: defaultdict[str, int], key: str) -> None:
        if counts.get(key, 1) <= 0:
            del counts[key]

    # ----- refusals ---------------------------------------------------------------------------------

    def refused(self, reason: str, offender: str, message: str) -> None:
        """Count a refusal; log it when this offender was not yet said for this reason."""
        metrics.GATEWAY_REFUSALS.labels(reason if reason in REASONS else "other").inc()
        key = (reason, offender)
        if key in self._said:
            return
        if len(self._said) >= SAID_KEPT:
            self._said.clear()
        self._said.add(key)
        log.warning("gateway refused %s (%s): %s; further refusals of it are counted in "
                    "anchorage_gateway_refusals_total{reason=%r}, not logged", offender, reason, message, reason)
