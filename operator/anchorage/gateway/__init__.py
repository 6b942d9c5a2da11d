"""The OpenAI-compatible model gateway (its own HTTP/1.1 server and client on asyncio; the admin API on aiohttp):
retries, per-trial tokens, usage and cost.

The local engine calls :func:`start_gateway` and hands each trial the token from
:meth:`Gateway.issue_token`; ``anchorage gateway --config FILE`` runs the same server standalone
(the cluster's Deployment). :mod:`anchorage.gateway.mock` is a deterministic, labelled mock upstream.
See docs/design-notes.md, section "Gateway".
"""

from anchorage.costs import Usage
from anchorage.gateway.gatewayconfig import GatewayConfig, RetryConfig, UpstreamConfig
from anchorage.gateway.running import BackgroundServer, Gateway, start_gateway

__all__ = ["BackgroundServer", "Gateway", "GatewayConfig", "RetryConfig", "UpstreamConfig", "Usage",
           "start_gateway"]
