"""The operator's side of the model gateway: per-trial tokens, their Secrets, revocation and cost.

Called by ``anchorage.controller.launching`` (an attempt's start), ``recording`` and ``finishing`` (a trial's end) and
``scoring`` (the ``trial.json`` record). A model-calling trial (its plan's ``needs_gateway``, the agent kind's answer) gets
a token the operator mints itself with the secret it shares with the gateway (``ANCHORAGE_GATEWAY_TOKEN_SECRET``;
``anchorage.gateway.tokens.mint_token``): the token names exactly this trial (namespace, name and uid, so a re-created
Trial of the same name gets a fresh ledger), its entry and campaign (the labels of the gateway's token and cost
metrics), and expires at the attempt's deadline (the Job's ``activeDeadlineSeconds`` from now) plus a margin
(``EXPIRY_MARGIN_SECONDS``). It goes into the Secret ``<job>-gateway``, created right after the Job and owned by it —
one API write per model-calling attempt, nothing else.

A trial's ``verification.panel`` / ``.cbu`` pod gets a token of its own (account ``<trial id>/<step>``,
:func:`step_account`), revoked when its Job ends, when the step's usage and cost are read the same way
(:func:`settle_step`) into the step's block of ``score.json``.

At the trial's end the operator revokes the token and reads the trial's usage from the gateway's admin
API (``ANCHORAGE_GATEWAY_ADMIN_TOKEN``, ``OperatorConfig.admin_url()``: the gateway's admin listener, which
agents cannot reach); tokens and ``costUSD`` (priced by the gateway's snapshot) go into the status patch the
trial's end writes anyway. The cost is *unknown* — ``costUSD`` absent, ``costUnknownReason`` saying why —
without an admin token, when the gateway cannot be reached (the token then stays valid until it expires),
and when the gateway itself does not know it (requests the upstream answered without usage:
``usage.unmeteredRequests``; models without a price). Unknown is never recorded as 0. Trials that call no
model cost 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from anchorage.controller import kube
from anchorage.errors import InputError
from anchorage.gateway.tokens import EXPIRY_MARGIN_SECONDS, mint_token
from anchorage.manifests import TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.jobs import OperatorConfig
from anchorage.trials import AgentPlan
from anchorage.trials.costing import protocol_cost, trial_cost

TOKEN_SECRET_ENV = "ANCHORAGE_GATEWAY_TOKEN_SECRET"
ADMIN_TOKEN_ENV = "ANCHORAGE_GATEWAY_ADMIN_TOKEN"
ADMIN_TIMEOUT_SEC = 5.0
COST_SOURCE = "gateway metering × price snapshot"
#: status.usage key → the gateway's usage key (``anchorage.costs.Usage.to_dict``)
USAGE_FIELDS = {"requests": "requests", "inputTokens": "input_tokens", "cachedInputTokens": "cached_input_tokens",
                "outputTokens": "output_tokens", "billedOutputTokens": "billed_output_tokens",
                "reasoningTokens": "reasoning_tokens", "unmeteredRequests": "unmetered_requests"}


def trial_id(trial: Mapping[str, Any]) -> str:
    """The gateway's id of a trial: ``<namespace>.<name>.<uid>`` (namespaces and uids have no dots)."""
    meta = trial["metadata"]
    return f"{meta['namespace']}.{meta['name']}.{meta['uid']}"


def _token_secret() -> bytes | None:
    value = os.environ.get(TOKEN_SECRET_ENV)
    return value.encode("utf-8") if value else None


def check(spec: TrialSpec, plan: AgentPlan) -> None:
    """Refuse a model-calling trial (``plan``: its agent's) the operator cannot give a token to (before anything is
    written)."""
    if plan.needs_gateway and _token_secret() is None:
        raise InputError(
            f"agent kind {spec.agent.kind!r} (model {spec.agent.model!r}) calls models through the gateway, but the "
            f"operator cannot mint its token: environment variable {TOKEN_SECRET_ENV} is not set",
            hint="with the Helm chart set gateway.tokenSecret.name (a Secret the operator and the gateway share); "
                 f"by hand, export {TOKEN_SECRET_ENV} to the secret the gateway's token_secret_env names")


def create_job(job: dict[str, Any], trial: Mapping[str, Any], spec: TrialSpec, plan: AgentPlan) -> None:
    """Create the attempt's Job; for a model-calling agent (``plan``: its agent's) then its token Secret, owned by the
    Job.

    Idempotent: a Job or Secret that exists already (409) is taken as created; the Job's uid then
    comes from a GET. The agent container waits for the Secret (the kubelet retries
    CreateContainerConfigError), so the Job may come first.
    """
    if not plan.needs_gateway:
        kube.create_job(job)
        return
    check(spec, plan)
    secret = _token_secret()
    assert secret is not None
    uid = kube.create_job_uid(job)
    owned = {**job, "metadata": {**job["metadata"], "uid": uid}}
    expires = time.time() + float(job["spec"]["activeDeadlineSeconds"]) + EXPIRY_MARGIN_SECONDS
    token = mint_token(secret, trial_id(trial), spec.entry, expires_at=expires, transcript=spec.transcripts,
                       campaign=_campaign(trial))
    kube.create_secret(jobs.gateway_token_secret(owned, token))


def _campaign(trial: Mapping[str, Any]) -> str | None:
    return (trial["metadata"].get("labels") or {}).get(jobs.LABEL_CAMPAIGN)


def step_account(trial: Mapping[str, Any], step: str) -> str:
    """The gateway account of a trial's ``verification.<step>`` pod (never the agent's)."""
    return f"{trial_id(trial)}/{step}"


def create_protocol_job(job: dict[str, Any], trial: Mapping[str, Any], spec: TrialSpec, step: str) -> str | None:
    """Create a trial's ``verification.<step>`` Job and its own token Secret (account :func:`step_account`, expiring
    with the Job's deadline plus the margin); returns why it cannot (no token secret), else None. Idempotent like
    :func:`create_job`. The token is revoked and the account's usage read when the Job ends (:func:`settle_step`)."""
    secret = _token_secret()
    if secret is None:
        return (f"verification.{step} calls models through the gateway, but the operator cannot mint its token: "
                f"{TOKEN_SECRET_ENV} is not set (Helm: gateway.tokenSecret)")
    uid = kube.create_job_uid(job)
    owned = {**job, "metadata": {**job["metadata"], "uid": uid}}
    expires = time.time() + float(job["spec"]["activeDeadlineSeconds"]) + EXPIRY_MARGIN_SECONDS
    token = mint_token(secret, step_account(trial, step), spec.entry, expires_at=expires, campaign=_campaign(trial))
    kube.create_secret(jobs.gateway_token_secret(owned, token))
    return None


class GatewayUnreachable(Exception):
    """The admin API did not answer (or answered an error)."""


def _admin(cfg: OperatorConfig, method: str, path: str, token: str) -> Any:
    url = cfg.admin_url() + path
    request = urllib.request.Request(url, method=method, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=ADMIN_TIMEOUT_SEC) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise GatewayUnreachable(f"{method} {url} answered {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise GatewayUnreachable(f"{method} {url} failed: {exc}") from exc


def _unknown(reason: str) -> dict[str, Any]:
    return {"costUSD": None, "usage": None, "costUnknownReason": reason}


def settle(trial: Mapping[str, Any], cfg: OperatorConfig) -> dict[str, Any]:
    """Status fields of a model-calling trial's cost at its end (``costUSD``, ``usage``, ``costUnknownReason``): its
    token revoked (best effort), then its usage read at the gateway. Nulls remove stale fields (the status is
    merge-patched).
    """
    usage, unreadable = revoke_and_read(trial_id(trial), cfg, "trial")
    return cost_fields(usage) if usage is not None else _unknown(str(unreadable))


def revoke_and_read(account: str, cfg: OperatorConfig, what: str) -> tuple[dict[str, Any] | None, str | None]:
    """Revoke ``account``'s token (best effort), then read its usage at the gateway's admin API: (usage, None), or
    (None, why it could not be read)."""
    admin = os.environ.get(ADMIN_TOKEN_ENV)
    if not admin:
        return None, (f"the operator has no gateway admin token ({ADMIN_TOKEN_ENV}), so it cannot read the {what}'s "
                      "usage: set gateway.adminTokenSecret in the Helm values")
    path = urllib.parse.quote(account, safe="")
    with contextlib.suppress(GatewayUnreachable):  # best effort: the usage read says whether the gateway is there
        _admin(cfg, "DELETE", f"/admin/v1/tokens/{path}", admin)
    try:
        usage = _admin(cfg, "GET", f"/admin/v1/usage/{path}", admin)
    except GatewayUnreachable as exc:
        return None, f"the gateway's usage of this {what} could not be read: {exc}"
    if not isinstance(usage, dict):
        return None, f"the gateway answered no usage of this {what}"
    return usage, None


def settle_step(trial: Mapping[str, Any], step: str, cfg: OperatorConfig) -> dict[str, Any]:
    """A ``verification.<step>`` pod ended: revoke its token, read its account's usage; the step's cost fields
    (:func:`anchorage.trials.costing.protocol_cost`, the local engine's rule: unknown is None with the reason)."""
    usage, unreadable = revoke_and_read(step_account(trial, step), cfg, f"verification.{step} step")
    return protocol_cost(None if usage is None else [usage], unreadable=unreadable)


def cost_fields(usage: Mapping[str, Any]) -> dict[str, Any]:
    """Status fields from the gateway's usage of a trial (``anchorage.costs.Usage.to_dict``): the cost only
    when the gateway knows it whole (:func:`anchorage.trials.costing.trial_cost`), else None with the reason —
    never a partial sum, never 0."""
    cost = trial_cost(usage, calls_models=True)
    return {"usage": {key: int(usage.get(source) or 0) for key, source in USAGE_FIELDS.items()},
            "costUSD": cost.usd, "costUnknownReason": cost.unknown_reason}


def read_transcript(trial: Mapping[str, Any], cfg: OperatorConfig) -> bytes:
    """The trial's transcript at the gateway (JSON lines; empty when none was kept), for its artifact."""
    admin = os.environ.get(ADMIN_TOKEN_ENV)
    if not admin:
        raise GatewayUnreachable(f"the operator has no gateway admin token ({ADMIN_TOKEN_ENV})")
    url = f"{cfg.admin_url()}/admin/v1/transcripts/{urllib.parse.quote(trial_id(trial), safe='')}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {admin}"})
    try:
        with urllib.request.urlopen(request, timeout=ADMIN_TIMEOUT_SEC) as response:
            return bytes(response.read())
    except (OSError, urllib.error.HTTPError) as exc:
        raise GatewayUnreachable(f"GET {url} failed: {exc}") from exc


def record_fields(status: Mapping[str, Any]) -> dict[str, Any]:
    """The cost part of a ``trial.json`` record, from the Trial's status (same keys as the local engine's)."""
    usage = status.get("usage")
    fields: dict[str, Any] = {"cost_usd": status.get("costUSD")}
    if usage:
        fields["usage"] = {source: usage.get(key, 0) for key, source in USAGE_FIELDS.items()}
        fields["usage"]["cost_usd"] = status.get("costUSD")
        fields["cost_source"] = COST_SOURCE
    if status.get("costUnknownReason"):
        fields["cost_unknown_reason"] = status["costUnknownReason"]
    return fields


def forget_campaign(name: str, cfg: OperatorConfig) -> None:
    """Ask the gateway to drop a deleted campaign's series (tokens, cost) from its ``/metrics``; best effort
    (no admin token, or no gateway: its counters of that campaign stay until the gateway restarts)."""
    admin = os.environ.get(ADMIN_TOKEN_ENV)
    if admin:
        with contextlib.suppress(GatewayUnreachable):
            _admin(cfg, "DELETE", f"/admin/v1/campaigns/{urllib.parse.quote(name, safe='')}/metrics", admin)
