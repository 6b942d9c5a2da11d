"""An attempt's start: admission, the trial's finalizer, the NetworkPolicy preflight, ``Running`` (or ``Queued``)
recorded, then its Job and a model-calling agent's gateway token (:func:`start_attempt`); a new Trial that cannot
start ends ``InfrastructureFailed`` saying why (:func:`launch`).

Names are deterministic (``<trial>-a<N>``), so a restarted operator that starts an attempt again finds its Job
instead of making a second one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from anchorage import metrics
from anchorage.controller import enforcement, finalizers, kube, kueue, metering, policies
from anchorage.controller.addressing import GatewayAddressError, gateway_address
from anchorage.controller.settings import config
from anchorage.controller.trialstate import condition, job_name, task_inputs, trial_spec, typed
from anchorage.errors import AnchorageError
from anchorage.manifests import TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.conditions import lifecycle
from anchorage.runtime.kube.status import TrialStatus, now_rfc3339
from anchorage.trials import AgentPlan, Phase, Reason
from anchorage.trials.admission import admit
from anchorage.trials.agents import OPERATOR


def start_attempt(body: Mapping[str, Any], spec: TrialSpec, attempt: int) -> None:
    """Record the attempt as Running, then create its Job (the Job's events then find it Running).

    A crash between the two is repaired by :func:`anchorage.controller.trials.repair`, which re-creates a missing Job.
    """
    if finalizers.leaving(body):
        return  # deleted meanwhile: its finalizer's handler stops what runs (trial_event)
    meta = body["metadata"]
    campaign = jobs.named(meta, jobs.LABEL_CAMPAIGN)
    admit(spec.agent, spec.verification, OPERATOR)
    plan, limits = task_inputs(spec)
    metering.check(spec, plan)  # a model-calling trial needs a token: refuse before anything is written
    body = finalizers.hold_trial(body)  # before its first Job: a deletion then stops it (a lone trial: one write)
    meta = body["metadata"]
    cfg = config()
    ns = cfg.trials_namespace or meta["namespace"]
    if attempt == 0:  # a trial starts only where its NetworkPolicies are confirmed enforced (else it waits, saying why)
        enforcement.admit(body, ns, cfg)
    job = jobs.trial_job(dict(body), spec, plan=plan, limits=limits, config=cfg,
                         job_name=job_name(meta["name"], attempt), campaign=campaign,
                         gateway_address=gateway_alias(cfg, plan))
    queue = jobs.trial_queue(spec, cfg)
    if queue:  # refused before anything is written when Kueue or the LocalQueue is missing
        kueue.require(queue, job["metadata"]["namespace"])
    if (body.get("status") or {}).get("jobName") != job["metadata"]["name"]:
        prefix = jobs.trial_prefix(meta["namespace"], meta["name"], campaign)
        # queued: no pod and no agent time until Kueue admits the Job (controller.queueing then writes Running)
        when = {"queue": queue, "queued_time": now_rfc3339(), "start_time": None} if queue else \
            {"start_time": now_rfc3339()}
        phase, why = (Phase.QUEUED, f"waiting for admission by Kueue LocalQueue {queue}") if queue else \
            (Phase.RUNNING, "the agent is running")
        running = TrialStatus(
            phase=phase, attempt=attempt, job_name=job["metadata"]["name"], **when,
            record_uri=f"{cfg.store_uri.rstrip('/')}/{prefix}", observed_generation=meta.get("generation"),
            conditions=typed([condition("Ready", "False", str(phase), why, meta.get("generation")),
                              *lifecycle("working", str(phase), why, meta.get("generation"))]))
        if not kube.patch_status("trials", meta["namespace"], meta["name"], running.patch(),
                                 resource_version=meta.get("resourceVersion")):
            raise kopf.TemporaryError(f"trial {meta['name']} changed (or is gone) since it was read; not launched",
                                      delay=1)
        if campaign is None:  # a campaign's trials are announced by their campaign (one write less each)
            kube.post_event(dict(body), "Normal", "Queued" if queue else "Started",
                            f"attempt {attempt} {'queued in ' + queue if queue else 'running'} as Job "
                            f"{job['metadata']['name']}")
    policies.ensure(job["metadata"]["namespace"], cfg)
    metering.create_job(job, body, spec, plan)  # the Job, then a model-calling agent's token Secret


def gateway_alias(cfg: jobs.OperatorConfig, plan: AgentPlan) -> str | None:
    """The gateway's address for a trial pod's ``hostAliases`` (its agent has no DNS): required by a model-calling
    agent (no address: the platform's failure before anything runs), given to any other agent when there is one."""
    if plan.replay is not None:
        return None
    try:
        return gateway_address(cfg)
    except GatewayAddressError:
        if plan.needs_gateway:
            raise
        return None


def launch(trial: Mapping[str, Any]) -> None:
    """Start a new trial's first attempt; a trial that cannot start ends InfrastructureFailed."""
    meta, status = trial["metadata"], trial.get("status") or {}
    try:
        start_attempt(trial, trial_spec(trial), int(status.get("attempt") or 0))
    except (ValidationError, AnchorageError) as exc:
        generation = meta.get("generation")
        reason = Reason.GATEWAY_ERROR if isinstance(exc, GatewayAddressError) else Reason.SANDBOX_ERROR
        failed = TrialStatus(phase=Phase.INFRASTRUCTURE_FAILED, reason=reason, message=str(exc),
                             observed_generation=generation,
                             conditions=typed([condition("Ready", "False", "InvalidInput", str(exc)[:1000], generation),
                                               *lifecycle("failed", "InvalidInput", str(exc)[:1000], generation)]))
        kube.patch_status("trials", meta["namespace"], meta["name"], failed.patch())
        kube.post_event(dict(trial), "Warning", "InvalidInput", str(exc))
        metrics.operator_trial_finished(trial, Phase.INFRASTRUCTURE_FAILED, reason)
        raise kopf.PermanentError(f"cannot launch: {exc}") from exc

