"""The gateway's admin API: health, metrics, and (behind the admin token) tokens, usage and transcripts.

Built by :func:`anchorage.gateway.running.build` and served on ``admin_port`` — a listener of its own, which
the trials' network policy does not let agents reach (the chart's port 9090). The operator uses
``/admin/v1`` (``anchorage.controller.metering``): it revokes a trial's token and reads its usage at the
trial's end, reads its transcript, and removes a deleted campaign's series from
``/metrics``. Prometheus scrapes ``/metrics``; the kubelet probes ``/healthz``.
The admin token is compared in constant time.
"""

from __future__ import annotations

import json

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from anchorage import metrics
from anchorage.gateway.ledger import Ledger
from anchorage.gateway.server import error_response
from anchorage.gateway.tokens import same_secret
from anchorage.gateway.transcripts import Transcripts


class AdminApp:
    """The admin API's handlers, bound to the gateway's ledger and transcripts."""

    def __init__(self, ledger: Ledger, admin_token: str | None, transcripts: Transcripts | None,
                 metrics_path: str | None = "/metrics") -> None:
        self.ledger = ledger
        self.admin_token = admin_token
        self.transcripts = transcripts
        self.metrics_path = metrics_path

    def build(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self.health)
        if self.metrics_path:
            app.router.add_get(self.metrics_path, self.metrics)
        if self.admin_token:
            app.router.add_post("/admin/v1/tokens", self.issue)
            app.router.add_get("/admin/v1/usage/{trial}", self.usage)
            app.router.add_delete("/admin/v1/tokens/{trial}", self.revoke)
            app.router.add_get("/admin/v1/transcripts/{trial}", self.transcript)
            app.router.add_delete("/admin/v1/campaigns/{campaign}/metrics", self.forget_campaign)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(REGISTRY))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    def _is_admin(self, request: web.Request) -> bool:
        assert self.admin_token is not None
        return same_secret(request.headers.get("Authorization", ""), f"Bearer {self.admin_token}")

    async def issue(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return error_response(401, "unauthorized", "admin token required")
        try:
            body = await request.json()
            expires = body.get("expires_at")
            campaign = body.get("campaign")
            token = self.ledger.issue(str(body["trial_id"]), budget_usd=body.get("budget_usd"),
                                      rate_per_min=body.get("rate_per_min"), entry=body.get("entry"),
                                      expires_at=None if expires is None else float(expires),
                                      transcript=bool(body.get("transcript", False)),
                                      campaign=None if campaign is None else str(campaign))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return error_response(400, "invalid_request", f"expected {{trial_id, budget_usd?, rate_per_min?, "
                                  f"entry?, campaign?, expires_at?, transcript?}}: {exc}")
        await self.ledger.synced()  # answered once journalled
        return web.json_response({"token": token})

    async def usage(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return error_response(401, "unauthorized", "admin token required")
        return web.json_response(self.ledger.usage(request.match_info["trial"]).to_dict())

    async def revoke(self, request: web.Request) -> web.Response:
        if not self._is_admin(request):
            return error_response(401, "unauthorized", "admin token required")
        self.ledger.revoke(request.match_info["trial"])
        await self.ledger.synced()  # answered once journalled: a revocation the operator saw survives a crash
        return web.json_response({"revoked": request.match_info["trial"]})

    async def transcript(self, request: web.Request) -> web.Response:
        """The trial's transcript as JSON lines (empty when none was kept)."""
        if not self._is_admin(request):
            return error_response(401, "unauthorized", "admin token required")
        records = self.transcripts.read(request.match_info["trial"]) if self.transcripts is not None else []
        text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
        return web.Response(text=text, content_type="application/x-ndjson")

    async def forget_campaign(self, request: web.Request) -> web.Response:
        """Remove a deleted campaign's series (tokens, cost, unmetered requests) from ``/metrics``."""
        if not self._is_admin(request):
            return error_response(401, "unauthorized", "admin token required")
        removed = metrics.forget_campaign(request.match_info["campaign"])
        return web.json_response({"campaign": request.match_info["campaign"], "series_removed": removed})
