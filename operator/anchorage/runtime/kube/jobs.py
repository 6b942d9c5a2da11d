"""Pure builders of the Kubernetes objects the operator creates: trial Jobs, verifier Jobs,
NetworkPolicies and child custom resources.

Called by ``anchorage.controller`` (which only sends what these return) and by the tests, which
validate every built manifest with ``kubernetes-validate``. No client calls here.

A trial pod (one per Job, no retries; ``activeDeadlineSeconds`` = the agent timeout plus the platform's allowance,
a backstop: the agent is timed from its own container's start, :func:`timed`; its network and name resolution:
:func:`agent_network` and :func:`network_policies`):

* init container ``fetch-task`` (operator image) copies the task's ``environment/data`` (and, for
  the oracle, ``solution/``) into the ``task`` volume, which the agent mounts read-only;
* native sidecar ``upload`` (operator image) is the only container with the storage credentials: it
  waits for the agent to finish, then for the store (reachable once the operator labelled the pod
  :data:`LABEL_STORE_ACCESS` after the agent's end), then uploads ``/root/results`` and ``/logs/agent`` to the
  trial's folder in the artifact store;
* container ``agent`` (the agent image) runs the agent command and writes its exit code where the
  sidecar sees it. Memory requested as limited, CPU as limited times ``cpu_request_ratio`` (1 by default),
  ephemeral storage up to :data:`STORAGE_REQUEST_MIB` (limited as the task says); restricted pod security; no
  service-account token.

Identity and pulls (:func:`pod_access`, :func:`store_identity`): every pod of the trials namespace carries the
operator's ``imagePullSecrets`` and ``automountServiceAccountToken: false``; with ``store_service_account`` it runs as
that account, and only the containers that read or write the store (``upload``, ``fetch-artifacts``) mount its token,
projected with the store's audience (``AWS_WEB_IDENTITY_TOKEN_FILE``, ``AWS_ROLE_ARN``); the pod's annotations tell the
EKS and Azure identity webhooks to skip every other container.

A model-calling agent (its plan's ``needs_gateway``) gets ``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL`` (the gateway)
and its per-trial token as ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY`` through ``secretKeyRef`` to the Secret
``<job>-gateway`` (:func:`gateway_token_secret`), which the operator creates right after the Job, owned
by it; the kubelet holds the agent container until the Secret exists.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import math
import urllib.parse
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from anchorage import agentclis
from anchorage.campaigns.names import child_name, label_value
from anchorage.errors import InputError
from anchorage.manifests import API, TrialSpec
from anchorage.runtime.kube.resolver import RESOLVER_ENV, SEARCH_ENV
from anchorage.trials.agents import AgentPlan
from anchorage.trials.limits import LOG_MAX_MB, MIB, LimitsInForce

Manifest = dict[str, Any]
MANAGED_BY = {"app.kubernetes.io/managed-by": "anchorage"}
LABEL_TRIAL = "anchorage.dev/trial"
LABEL_CAMPAIGN = "anchorage.dev/campaign"
LABEL_SCORING = "anchorage.dev/scoring-run"
LABEL_ROLE = "anchorage.dev/role"
LABEL_STEP = "anchorage.dev/step"
LABEL_NETWORK = "anchorage.dev/network"
#: The finalizer of every Trial and ScoringRun the operator runs: their Jobs live in the trials namespace, where no
#: ownerReference from another namespace reaches, so the operator stops them before the object goes
#: (``anchorage.controller.finalizers``). Set in the body of the children it creates, added to the others by a patch.
JOBS_FINALIZER = "anchorage.dev/stop-jobs"
#: The label that opens the store's egress (policy ``anchorage-store-egress``): verifier, protocol and replay pods
#: carry it from the start; a trial pod whose agent runs gets it from the operator once the kubelet reports the agent
#: container terminated (``anchorage.controller.pods``).
LABEL_STORE_ACCESS = "anchorage.dev/store-access"
#: The agent's timeout in seconds, on a trial pod (the operator's pod watch times the agent from its container's start).
ANNOTATION_TIMEOUT = "anchorage.dev/agent-timeout-seconds"
#: The only nameserver of a trial pod whose agent runs: nothing answers there (a pod's own loopback).
NO_DNS = "127.0.0.1"
RUN_DIR = "/run/anchorage"
POLICY_CONTAINER = "await-policy"  # the trial pod's last init container: the agent starts once its policies hold
#: Where the fetch and upload containers (the operator's image, user 65532) mount the agent's results and logs: folders
#: of their own — the agent's paths (/root/results, /logs/agent) lie under folders of the agent image's layout.
HELPER_RESULTS, HELPER_LOGS = "/scratch/results", "/scratch/logs"
AGENT_HOME = "/root"  # the agent's HOME, as in the local sandbox: the "home" emptyDir (the image's agent user's home)
AGENT_IMAGE_PATH = "/opt/venv/bin:/opt/anchorage/agents/bin:/usr/local/bin:/usr/bin:/bin"  # images/agent-base's PATH
TOKEN_KEY = "token"  # key of the per-trial gateway token in its Secret
#: Labels that name an object (trial, campaign, scoring run): their value is the name made a label value
#: (``label_value``: hashed when longer than 63 characters); the full name is in the annotation of the same key.
NAME_LABELS = (LABEL_TRIAL, LABEL_CAMPAIGN, LABEL_SCORING)


def name_labels(**names: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) naming related objects, e.g. ``name_labels(trial=..., campaign=...)``."""
    keys = {"trial": LABEL_TRIAL, "campaign": LABEL_CAMPAIGN, "scoring_run": LABEL_SCORING}
    present = {keys[k]: v for k, v in names.items() if v}
    return {k: label_value(v) for k, v in present.items()}, dict(present)


def named(meta: Manifest, key: str) -> str | None:
    """The full name an object's name label ``key`` stands for (its annotation, else the label itself)."""
    return (meta.get("annotations") or {}).get(key) or (meta.get("labels") or {}).get(key)


def verifier_job_name(run: str) -> str:
    """The verifier Job of the ScoringRun ``run`` (a DNS label: ≤ 63 characters)."""
    return child_name(run, "verify")
TOKEN_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")  # the gateway takes Bearer and x-api-key alike
SCRATCH_IN = "/scratch/in"  # where the verifier pod's init container puts the artifacts it scores


#: Port of the gateway's admin listener (/healthz, /metrics, /admin/v1) in the Helm chart.
GATEWAY_ADMIN_PORT = 9090
#: Name of the gateway container's model API port: the only one trial pods may reach (not the admin port).
GATEWAY_MODEL_PORT = "http"


class OperatorConfig(BaseModel):
    """How the operator builds pods (from the Helm values / ``anchorage operator`` flags)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trials_namespace: str | None = Field(default=None, description="Namespace of Jobs; default: the CR's own.")
    store_uri: str = Field(default="file:///var/lib/anchorage/runs", description="Root of the run folders.")
    storage_secret: str | None = Field(default=None, description="Secret with S3 credentials (sidecar only).")
    store_endpoint_url: str | None = Field(default=None, description="S3 endpoint of the pods that read or write the "
                                           "store (AWS_ENDPOINT_URL_S3; empty: AWS).")
    store_region: str | None = Field(default=None, description="S3 region of those pods (AWS_DEFAULT_REGION).")
    store_service_account: str | None = Field(
        default=None, description="ServiceAccount of trial, verifier and protocol pods (in the trials namespace): its "
        "token reaches only the containers that read or write the store, as a projected token with "
        "store_token_audience (web identity: IRSA, GKE or AKS OIDC federation), never the agent. Empty: the "
        "namespace's default account, no token.")
    store_token_audience: str = Field(default="sts.amazonaws.com", min_length=1,
                                      description="Audience of the store containers' projected token.")
    store_token_seconds: int = Field(default=3600, ge=600, description="Lifetime of that token (the kubelet renews "
                                     "it before it expires).")
    store_role_arn: str | None = Field(default=None, description="Role the store containers assume with that token "
                                       "(AWS_ROLE_ARN); empty: whatever the platform injects, if anything.")
    image_pull_secrets: list[str] = Field(default_factory=list, description="Secrets (in the trials namespace) the "
                                          "kubelet pulls the images of trial, verifier and protocol pods with.")
    operator_image: str = Field(default="ghcr.io/anchorage/operator:0.1.0", description="Image with anchorage.")
    agent_image: str = Field(default="ghcr.io/anchorage/agent-base:0.1.0", description="Default agent image.")
    verifier_image: str = Field(default="ghcr.io/anchorage/verifier:0.1.0", description="Image of the scorer.")
    gateway_url: str = Field(default="http://anchorage-gateway.anchorage.svc:8080/v1",
                             description="Gateway URL the agents use (OPENAI_BASE_URL, ends in /v1).")
    gateway_admin_url: str | None = Field(
        default=None, description="Base URL of the gateway's admin listener (/admin/v1: usage, revocation); default: "
        f"gateway_url's host on port {GATEWAY_ADMIN_PORT}. Used only when ANCHORAGE_GATEWAY_ADMIN_TOKEN is set.")
    gateway_selector: dict[str, str] = Field(default_factory=lambda: {"app.kubernetes.io/name": "anchorage-gateway"},
                                             description="Labels of the gateway pods (NetworkPolicy egress).")
    gateway_namespace: str | None = Field(default=None, description="Namespace of the gateway pods.")
    kueue_queue: str | None = Field(default=None, description="Kueue LocalQueue of trial Jobs whose Trial names none "
                                    "(spec.queueName); empty: not queued.")
    kueue_scoring_queue: str | None = Field(
        default=None, description="Kueue LocalQueue of verifier, panel and CBU Jobs; empty: they are not queued (they "
        "are short, bounded by their deadlines, and follow an agent's run the queue already admitted).")
    runtime_class_name: str | None = Field(default=None, description="RuntimeClass of trial pods (gVisor, Kata, ...) "
                                           "unless a Trial or campaign names its own.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="nodeSelector of trial, verifier and "
                                          "protocol pods (e.g. a node pool kept for untrusted agents).")
    tolerations: list[dict[str, Any]] = Field(default_factory=list, description="Tolerations of trial, verifier and "
                                              "protocol pods (Kubernetes Toleration objects).")
    affinity: dict[str, Any] | None = Field(default=None, description="Affinity of trial, verifier and protocol pods "
                                            "(a Kubernetes Affinity object).")
    priority_class_name: str | None = Field(default=None, description="PriorityClass of trial, verifier and protocol "
                                            "pods.")
    cpu_request_ratio: float = Field(
        default=1.0, gt=0, le=1, description="An agent container's CPU request as a share of its CPU limit: 1 reserves "
        "every trial's CPUs (timings comparable across trials); lower packs more trials on a node, each still limited.")
    ttl_seconds_after_finished: int = Field(default=3600, ge=0, description="Job TTL after it ends.")
    verifier_deadline_sec: int = Field(
        default=180, gt=0, description="The verifier's time (task.toml's verifier timeout, the seed's 180 s), timed "
        "from its scoring container's start: scheduling, image pulls and the artifacts' fetch never count. The Job's "
        "activeDeadlineSeconds adds the platform's allowance as a backstop.")
    task_source: str | None = Field(default=None, description="ANCHORAGE_TASKS inside the operator image.")
    agent_seccomp_profile: str | None = Field(
        default=None, description="seccomp profile of agent containers, relative to the kubelet's seccomp root "
        "(e.g. anchorage/agent.json, installed on the nodes from `python -m anchorage.runtime.seccomp_policy`: the "
        "local sandbox's filter); default: the runtime's own (RuntimeDefault).")
    task_image: str | None = Field(
        default=None, description="The task bundle image (images/tasks): the pods copy the tasks from it (an agent "
        "only its task's data, a verifier its task without the solution). Empty: the tasks are in the operator image "
        "at task_source.")
    dns_selector: dict[str, str] = Field(default_factory=lambda: {"k8s-app": "kube-dns"},
                                         description="Labels of the cluster DNS pods in kube-system (NetworkPolicy "
                                         "egress of the pods that reach the store).")
    store_egress: list[dict[str, Any]] = Field(
        default_factory=list, description="NetworkPolicyEgressRules to the artifact store, for the pods labelled "
        f"{LABEL_STORE_ACCESS}=true (verifier, protocol and replay pods; a trial pod once its agent has ended). Empty: "
        "no store egress (a file:// store).")
    cluster_dns: list[str] = Field(
        default_factory=list, description="The cluster DNS servers (e.g. 10.96.0.10) a trial pod's upload sidecar "
        "resolves the store's name with: the pod's own resolv.conf answers nothing during the agent phase.")
    cluster_dns_search: list[str] = Field(
        default_factory=lambda: ["svc.cluster.local", "cluster.local"],
        description="The search domains of those lookups (a store named <svc>.<namespace>.svc resolves).")
    upload_grace_sec: int = Field(default=120, ge=10, le=3600, description="terminationGracePeriodSeconds of the "
                                  "pods the operator creates: the upload sidecar's time to reach the store and upload "
                                  "after the main container ended (a native sidecar is SIGKILLed after it).")
    unschedulable_after_sec: int = Field(
        default=600, ge=10, description="A trial pod no node can take (Unschedulable), or a Job whose pod a "
        "ResourceQuota refuses, for this long ends its attempt InfrastructureFailed (unschedulable, quota_exceeded).")
    start_after_sec: int = Field(
        default=120, ge=10, description="A trial pod's container that cannot start for this long (an image pull "
        "failing, CreateContainerConfigError) ends its attempt InfrastructureFailed (image_pull, container_config); "
        "an image the registry does not have ends it at once.")
    node_lost_after_sec: int = Field(
        default=60, ge=0, description="tolerationSeconds of the pods the operator creates for the not-ready and "
        "unreachable node taints: a lost node's pods are evicted this long after it was marked (node_lost).")
    require_enforcement: bool = Field(
        default=True, description="Refuse to start trials in a namespace until a probe confirms that its "
        "NetworkPolicies are enforced (anchorage.controller.enforcement); false: start them unconfirmed.")

    @field_validator("agent_seccomp_profile")
    @classmethod
    def _relative_profile(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or ".." in value.split("/") or not value.strip("/")):
            raise ValueError(f"agent_seccomp_profile {value!r} must be a path relative to the kubelet's seccomp root "
                             "(e.g. anchorage/agent.json), without '..'")
        return value

    def admin_url(self) -> str:
        """Base URL of the gateway's admin API: ``gateway_admin_url``, else ``gateway_url``'s scheme and host on
        :data:`GATEWAY_ADMIN_PORT` (the admin listener is a port of its own, which agents cannot reach)."""
        if self.gateway_admin_url:
            return self.gateway_admin_url.rstrip("/")
        parts = urllib.parse.urlsplit(self.gateway_url)
        host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
        return f"{parts.scheme}://{host}:{GATEWAY_ADMIN_PORT}"


#: The taints a node gets when the control plane loses it (NoExecute: its pods are evicted once they stop tolerating
#: them; Kubernetes' default toleration is 300 s, ``node_lost_after_sec`` shortens it).
NODE_LOST_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def scheduling(config: OperatorConfig) -> Manifest:
    """The pod-spec fields that place the pods of the trials namespace (trial, verifier, protocol) on nodes: the
    chart's ``trials.nodeSelector``, ``tolerations``, ``affinity`` and ``priorityClassName`` (only those set), and
    the lost-node taints tolerated for ``node_lost_after_sec`` (unless ``tolerations`` names them itself)."""
    own = {t.get("key") for t in config.tolerations}
    lost = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": config.node_lost_after_sec}
            for key in NODE_LOST_TAINTS if key not in own]
    fields: Manifest = {"nodeSelector": dict(config.node_selector), "tolerations": [*config.tolerations, *lost],
                        "affinity": config.affinity, "priorityClassName": config.priority_class_name}
    return {key: value for key, value in fields.items() if value}


#: Where the store containers find their projected ServiceAccount token (AWS_WEB_IDENTITY_TOKEN_FILE).
STORE_TOKEN_DIR = "/var/run/secrets/anchorage/store"
STORE_TOKEN_VOLUME = "store-token"


def pod_access(config: OperatorConfig) -> Manifest:
    """The pod-spec fields of the pods of the trials namespace that say who they are to the cluster: the pull secrets
    of their images and, with ``store_service_account``, that account (its token is never mounted automatically:
    only the store's containers get one, :func:`store_identity`)."""
    fields: Manifest = {"automountServiceAccountToken": False}
    if config.store_service_account:
        fields["serviceAccountName"] = config.store_service_account
    if config.image_pull_secrets:
        fields["imagePullSecrets"] = [{"name": name} for name in config.image_pull_secrets]
    return fields


def store_identity(config: OperatorConfig) -> tuple[list[Manifest], list[Manifest], list[Manifest]]:
    """(env, volumeMounts, volumes) that give the store's containers the pod's web identity: the ServiceAccount's
    token projected with the store's audience (AWS_WEB_IDENTITY_TOKEN_FILE) and the role to assume (AWS_ROLE_ARN);
    nothing without ``store_service_account``."""
    if not config.store_service_account:
        return [], [], []
    env = [{"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": f"{STORE_TOKEN_DIR}/token"}]
    if config.store_role_arn:
        env.append({"name": "AWS_ROLE_ARN", "value": config.store_role_arn})
    mounts = [{"name": STORE_TOKEN_VOLUME, "mountPath": STORE_TOKEN_DIR, "readOnly": True}]
    volumes = [{"name": STORE_TOKEN_VOLUME, "projected": {"sources": [{"serviceAccountToken": {
        "audience": config.store_token_audience, "expirationSeconds": config.store_token_seconds, "path": "token"}}]}}]
    return env, mounts, volumes


def identity_annotations(pod_spec: Manifest) -> dict[str, str]:
    """Pod annotations that keep the platforms' identity webhooks (EKS pod identity, Azure workload identity) from
    injecting a credential into any container but the store's: every other container is listed as skipped."""
    mounted = {c["name"] for c in [*pod_spec.get("initContainers", []), *pod_spec["containers"]]
               if any(m["name"] == STORE_TOKEN_VOLUME for m in c.get("volumeMounts", []))}
    if "serviceAccountName" not in pod_spec:
        return {}
    others = [c["name"] for c in [*pod_spec.get("initContainers", []), *pod_spec["containers"]] if c["name"] not in mounted]
    return {"eks.amazonaws.com/skip-containers": ",".join(others),
            "azure.workload.identity/skip-containers": ";".join(others)} if others else {}
def platform_allowance(config: OperatorConfig) -> int:
    """Seconds a trial Job's ``activeDeadlineSeconds`` gives beyond the agent's timeout: the bounds within which the
    operator decides a platform failure (no node, no image), the upload's grace and five minutes more. The agent's
    own deadline is timed from its container's start (``anchorage.controller.pods``): this is only a backstop."""
    return config.unschedulable_after_sec + config.start_after_sec + config.upload_grace_sec + 300


def gateway_host(config: OperatorConfig) -> str | None:
    """The host name of ``gateway_url`` when it is a name (a trial pod resolves it through ``hostAliases``), None for
    an IP address."""
    host = urllib.parse.urlsplit(config.gateway_url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host or None
    return None


def token_secret_name(job_name: str) -> str:
    """The Secret holding the gateway token of one attempt's Job."""
    return f"{job_name}-gateway"


def gateway_token_secret(job: Manifest, token: str) -> Manifest:
    """The Secret with the trial's gateway token, owned by its Job (Kubernetes deletes it with the Job).

    ``job`` is the Job as the API returned it (its ``uid`` is needed for the owner reference).
    """
    meta = job["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in (*MANAGED_BY, LABEL_TRIAL, LABEL_CAMPAIGN)}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k in NAME_LABELS}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "immutable": True,
            "metadata": {"name": token_secret_name(meta["name"]), "namespace": meta["namespace"],
                         "labels": {**labels, LABEL_ROLE: "gateway-token"}, "annotations": annotations,
                         "ownerReferences": [owner_ref({"apiVersion": "batch/v1", **job, "kind": "Job"})]},
            "data": {TOKEN_KEY: base64.b64encode(token.encode("utf-8")).decode("ascii")}}


def owner_ref(obj: Manifest, *, controller: bool = True) -> Manifest:
    """An ownerReference to ``obj`` (same namespace only: Kubernetes ignores cross-namespace owners)."""
    return {"apiVersion": obj.get("apiVersion", API), "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}


def trial_prefix(namespace: str, trial: str, campaign: str | None) -> str:
    """The trial's folder under the store root (``<campaign>/<trial>``; lone trials under ``_trials/<ns>``)."""
    return f"{campaign}/{trial}" if campaign else f"_trials/{namespace}/{trial}"


def signalled(name: str, argv: list[str]) -> list[str]:
    """``argv`` wrapped so that its exit code lands in ``RUN_DIR/exit-code`` when it ends: the upload sidecar's
    signal to upload (the operator reads how it ended from the Pod's container statuses, never from this file)."""
    return ["/bin/sh", "-c", f'"$@"; rc=$?; echo $rc > {RUN_DIR}/exit-code; exit $rc', name, *argv]


def timed(name: str, argv: list[str], seconds: int) -> list[str]:
    """:func:`signalled`, with the agent's deadline kept inside its container: ``argv`` runs as a child of the
    container's first process (a shell, which no process of the container can signal: it has no handlers), and is
    killed ``seconds`` after the container started; the shell then writes the exit code and exits, and with it every
    process left in the container's pid namespace. So the agent's time starts when its container starts (scheduling
    and image pulls never count), and its results are uploaded like any other end's. The operator decides that the
    agent timed out from the kubelet's own timestamps of the container, and stops a pod whose agent outlived the
    timer (``anchorage.controller.pods``)."""
    script = (f'"$@" & pid=$!; (sleep {seconds}; kill -KILL $pid) >/dev/null 2>&1 & '
              f'wait $pid; rc=$?; echo $rc > {RUN_DIR}/exit-code; exit $rc')
    return ["/bin/sh", "-c", script, name, *argv]


def agent_command(plan: AgentPlan) -> list[str]:
    """The argv of the agent container for a planned agent (the instruction is already in it)."""
    if plan.replay is not None:
        return ["true"]  # fetch-task already copied the replayed artifact into /root/results
    if plan.builtin is not None:  # admission refuses such kinds (trials.agents.refusal); a builder never guesses
        raise InputError(f"agent kind {plan.kind!r} runs on the local engine only",
                         hint="use kind 'command' with a mock-agent image on the cluster")
    return list(plan.argv)


def resources_in_force(limits: LimitsInForce) -> dict[str, str]:
    """The agent container's resource limits for the limits in force (:func:`anchorage.trials.limits.resolve_limits`)."""
    values: dict[str, str] = {"cpu": f"{int(limits.cpus * 1000)}m", "memory": f"{limits.memory_mb}Mi",
                              "ephemeral-storage": f"{limits.storage_mb}Mi"}
    if limits.gpus:
        values["nvidia.com/gpu"] = str(limits.gpus)
    return values


def artifact_in_trial(path: str | None) -> str | None:
    """Where the verifier found a trial's artifact (``/scratch/in/0/X``), as a path in the trial's folder
    (``artifacts/X``, as the local engine records it)."""
    if not path or not path.startswith(f"{SCRATCH_IN}/"):
        return path
    _, _, rest = path.removeprefix(f"{SCRATCH_IN}/").partition("/")
    return f"artifacts/{rest}" if rest else None


#: What an agent container requests of its ephemeral storage (its limit stays the task's ``storage_mb``): enough for
#: a task's data and results; the scheduler then places trials on nodes with ordinary disks, and the kubelet still
#: evicts a pod past its limit.
STORAGE_REQUEST_MIB = 1024


def requests_in_force(limits: dict[str, str], config: OperatorConfig) -> dict[str, str]:
    """The agent container's requests for its ``limits`` (:func:`resources_in_force`): memory and GPUs as limited
    (memory cannot be shared without OOM kills), CPU the limit times ``cpu_request_ratio`` (1: each trial's CPUs
    reserved, so no trial runs slower for a neighbour), ephemeral storage :data:`STORAGE_REQUEST_MIB` at most."""
    requests = dict(limits)
    millicpus = int(limits["cpu"].removesuffix("m"))
    requests["cpu"] = f"{max(1, math.ceil(millicpus * config.cpu_request_ratio))}m"
    storage = int(limits["ephemeral-storage"].removesuffix("Mi"))
    requests["ephemeral-storage"] = f"{min(storage, STORAGE_REQUEST_MIB)}Mi"
    return requests


def _resources(limits: LimitsInForce, config: OperatorConfig) -> Manifest:
    values = resources_in_force(limits)
    return {"requests": requests_in_force(values, config), "limits": dict(values)}


SCRATCH_LIMIT_MIB = 1024
"""Size of the agent's writable HOME (/root) and /tmp, each (the local engine's tmp_mb)."""


def folder_quotas(limits: LimitsInForce) -> dict[str, int]:
    """Byte quotas of the agent's results and log folders (the local engine's): the results' in force
    (``resultMaxBytes``, default min(storage, 512 MiB)); logs min(storage, 256 MiB)."""
    return {"results": limits.result_max_bytes, "logs": min(limits.storage_mb, LOG_MAX_MB) * MIB}


def writable_volumes(limits: LimitsInForce) -> list[Manifest]:
    """The agent's writable folders as size-limited emptyDirs. Results and logs are memory-backed (a tmpfs of
    the quota + 1 MiB: a write past it fails with ENOSPC, like the local engine's quota tmpfs, and the upload
    sidecar reports the folder as oversized); HOME and /tmp are disk-backed (over the limit, the kubelet
    evicts the pod)."""
    scratch = f"{min(limits.storage_mb, SCRATCH_LIMIT_MIB)}Mi"
    quotas = folder_quotas(limits)
    volumes: list[Manifest] = [{"name": name, "emptyDir": {"medium": "Memory",
                                                           "sizeLimit": f"{-(-(size + MIB) // MIB)}Mi"}}
                               for name, size in quotas.items()]
    return volumes + [{"name": name, "emptyDir": {"sizeLimit": scratch}} for name in ("home", "tmp")]


def _restricted(read_only_root: bool = True, seccomp: str | None = None) -> Manifest:
    return {"runAsNonRoot": True, "runAsUser": 65532, "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": read_only_root, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "Localhost", "localhostProfile": seccomp} if seccomp else {"type": "RuntimeDefault"}}


def _pod_security() -> Manifest:
    return {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"}}


TASKS_DIR = "/scratch/tasks"  # where a verifier's or protocol's tasks are copied (``copy-tasks``)


def _task_source(config: OperatorConfig, task: str) -> tuple[list[Manifest], list[Manifest]]:
    """How a verifier or protocol pod gets its task: (init containers, the main container's env). With the task
    image, ``copy-tasks`` copies the task without its ``solution/`` into the work volume and ``ANCHORAGE_TASKS``
    points there; without it, the tasks are in the operator image at ``task_source``."""
    if config.task_image is None:
        env = [{"name": "ANCHORAGE_TASKS", "value": config.task_source}] if config.task_source else []
        return [], env
    copy = {"name": "fetch-task", "image": config.task_image, "command": ["python", "-m", "anchorage.runtime.kube.pod"],
            "args": ["copy-tasks", "--task", task, "--exclude", "solution", "--dest", TASKS_DIR],
            "securityContext": _restricted(), "volumeMounts": [{"name": "work", "mountPath": "/scratch"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}}
    return [copy], [{"name": "ANCHORAGE_TASKS", "value": TASKS_DIR}]


def _storage_env(config: OperatorConfig, dest: str) -> tuple[list[Manifest], list[Manifest]]:
    """(env, envFrom) of a container that reads or writes the store: where, the S3 endpoint (AWS_ENDPOINT_URL_S3, so a
    web identity's STS calls still go to AWS), the region, the web identity (:func:`store_identity`) and the
    credentials Secret."""
    env = [{"name": "ANCHORAGE_STORE", "value": config.store_uri}, {"name": "ANCHORAGE_DEST", "value": dest}]
    env += [{"name": name, "value": value} for name, value in (("AWS_ENDPOINT_URL_S3", config.store_endpoint_url),
                                                              ("AWS_DEFAULT_REGION", config.store_region)) if value]
    env += store_identity(config)[0]
    env_from = [{"secretRef": {"name": config.storage_secret}}] if config.storage_secret else []
    return env, env_from


#: The upload sidecar's CPU, requested as limited (the pod stays Guaranteed). Its start — Python, the S3 client: about
#: 0.3 s of CPU — takes seconds at this share (6 s at the 50m it had), and it overlaps the agent's run only as far as
#: the agent runs that long: a short agent's or a verifier's results waited for it.
SIDECAR_CPU = "100m"


def _sidecar(config: OperatorConfig, dest: str, paths: dict[str, str], marker: str = "upload.json",
             tmp: str = "tmp", quotas: dict[str, int] | None = None) -> Manifest:
    env, env_from = _storage_env(config, dest)
    args = ["upload", "--wait", RUN_DIR, "--marker", marker, "--reach-seconds", str(config.upload_grace_sec // 2)]
    for name, path in paths.items():
        args += ["--put", f"{name}={path}"]
    for name, size in (quotas or {}).items():
        args += ["--quota", f"{name}={size}"]
    return {
        "name": "upload", "image": config.operator_image, "restartPolicy": "Always",
        "command": ["python", "-m", "anchorage.runtime.kube.pod"], "args": args,
        "env": env, "envFrom": env_from, "securityContext": _restricted(),
        "resources": {"requests": {"cpu": SIDECAR_CPU, "memory": "128Mi"},
                      "limits": {"cpu": SIDECAR_CPU, "memory": "128Mi"}},
        "volumeMounts": [{"name": "results", "mountPath": HELPER_RESULTS, "readOnly": True},
                         {"name": "logs", "mountPath": HELPER_LOGS, "readOnly": True},
                         {"name": "run", "mountPath": RUN_DIR}, {"name": tmp, "mountPath": "/tmp"},
                         *store_identity(config)[1]],
    }


def agent_env(plan: AgentPlan) -> dict[str, str]:
    """The agent container's own environment (the gateway's address and token are added apart): the plan's,
    HOME and TMPDIR on their emptyDirs, and for an agent CLI its folder first on PATH — the same folder as in
    the local sandbox (:func:`anchorage.agentclis.bin_dir`)."""
    env = {**plan.env, "MPLBACKEND": "Agg", "HOME": AGENT_HOME, "TMPDIR": "/tmp"}
    if plan.cli is not None:
        env["PATH"] = f"{agentclis.bin_dir(plan.cli)}:{AGENT_IMAGE_PATH}"
    return env


def _cli_check(plan: AgentPlan, image: str) -> list[Manifest]:
    """For an agent CLI, an init container in the agent's image that fails unless the pinned CLI is there:
    the pod then ends before the agent starts (the platform's failure, decided by nothing the agent runs)."""
    if plan.cli is None:
        return []
    command = plan.argv[0]
    script = (f'command -v {command} >/dev/null || {{ echo "the {plan.cli} CLI ({command}) is not on PATH ($PATH) in '
              f'this image: build images/agent-base with AGENT_CLIS including {plan.cli}" >&2; exit 127; }}')
    return [{"name": "check-agent", "image": image, "command": ["/bin/sh", "-c", script],
             "env": [{"name": "PATH", "value": agent_env(plan)["PATH"]}], "securityContext": _restricted(),
             "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}}]


#: Kueue's Job labels: the LocalQueue that admits the Job, and its WorkloadPriorityClass.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def trial_queue(spec: TrialSpec, config: OperatorConfig) -> str | None:
    """The Kueue LocalQueue of a trial's Jobs: the Trial's ``queueName``, else the operator's ``kueue_queue``."""
    return spec.queue_name or config.kueue_queue or None


def queue_labels(queue: str | None, priority: str | None) -> dict[str, str]:
    """The labels that hand a Job to Kueue (none without a queue)."""
    if not queue:
        return {}
    return {KUEUE_QUEUE_LABEL: queue, **({KUEUE_PRIORITY_LABEL: priority} if priority else {})}


def queued(queue: bool) -> Manifest:
    """A queued Job is created suspended: no pod until Kueue admits it (Kueue's webhook would suspend it too, but the
    Job must never start a pod before that)."""
    return {"suspend": True} if queue else {}


def _await_policy(plan: AgentPlan, config: OperatorConfig) -> list[Manifest]:
    """With ``require_enforcement``, the init container that starts last before an agent (never before a replay: no
    agent code runs): it waits until the pod's NetworkPolicies block its egress (``kube.pod await-policy``), so no agent
    runs in the moment after the pod's start before the policy engine has applied them to it."""
    if not config.require_enforcement or plan.replay is not None:
        return []
    return [{"name": POLICY_CONTAINER, "image": config.operator_image,
             "command": ["python", "-m", "anchorage.runtime.kube.pod"], "args": ["await-policy", "--seconds", "60"],
             "securityContext": _restricted(),
             "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"cpu": "100m", "memory": "96Mi"}}}]


def agent_network(plan: AgentPlan, config: OperatorConfig, gateway_address: str | None) -> Manifest:
    """The pod-spec fields of a trial pod's name resolution. A pod whose agent runs has no DNS: its only nameserver is
    the pod's own loopback, where nothing answers, and the gateway URL's host name is in its ``/etc/hosts``
    (``hostAliases``: ``gateway_address``, the gateway Service's ClusterIP, which the operator looks up; every agent
    gets it, a model-calling one also its token). Its upload
    sidecar, which reaches the store only after the agent ended, resolves the store's name itself through
    ``cluster_dns`` (``anchorage.runtime.kube.resolver``). A replay (no agent code runs) resolves names as any pod.
    Without ``cluster_dns`` the pod keeps the cluster's DNS (its policy still closes DNS during the agent phase)."""
    fields: Manifest = {}
    host = gateway_host(config)
    if plan.replay is None and host is not None and gateway_address:
        fields["hostAliases"] = [{"ip": gateway_address, "hostnames": [host]}]
    if plan.replay is None and config.cluster_dns:
        fields["dnsPolicy"] = "None"
        fields["dnsConfig"] = {"nameservers": [NO_DNS], "options": [{"name": "timeout", "value": "1"},
                                                                     {"name": "attempts", "value": "1"}]}
    return fields


def trial_job(trial: Manifest, spec: TrialSpec, *, plan: AgentPlan, limits: LimitsInForce,
              config: OperatorConfig, job_name: str, campaign: str | None,
              gateway_address: str | None = None) -> Manifest:
    """The Job running one attempt of a Trial; ``plan`` is :func:`anchorage.trials.plan_agent`'s, ``limits``
    :func:`anchorage.trials.limits.resolve_limits`'; ``gateway_address``
    the IP address the gateway URL's host name stands for in the pod (:func:`agent_network`).

    Its pod reaches the store only once its agent has ended (label :data:`LABEL_STORE_ACCESS`, added by the operator
    then; a replay has it from the start), waits up to ``upload_grace_sec`` for its sidecar's upload when it ends,
    and its Job's deadline is the agent's timeout plus :func:`platform_allowance` (the agent itself is timed from its
    container's start: :func:`timed`)."""
    ns = config.trials_namespace or trial["metadata"]["namespace"]
    name = trial["metadata"]["name"]
    dest = trial_prefix(trial["metadata"]["namespace"], name, campaign)
    argv = agent_command(plan)
    timeout = limits.deadline_sec
    wrapped = signalled("agent", argv) if plan.replay is not None else timed("agent", argv, timeout)
    fetch_args = ["fetch-task", "--task", spec.task, "--dest", "/task"]
    for folder in sorted(set(plan.binds.values())):
        fetch_args += ["--folder", folder]
    if plan.replay is not None:
        fetch_args += ["--replay-in-task" if plan.replay.in_task else "--replay", plan.replay.source,
                       "--results", HELPER_RESULTS]
    task_env = [{"name": "ANCHORAGE_TASKS", "value": config.task_source}] if config.task_source and \
        config.task_image is None else []
    fetch_env_from: list[Manifest] = []
    fetch_mounts: list[Manifest] = []
    if plan.replay is not None and not plan.replay.in_task and not plan.replay.source.startswith(("file://", "/")):
        # a store key (no file of the image): the platform's fetch-task reads it with the store's credentials
        store_env, fetch_env_from = _storage_env(config, dest)
        task_env, fetch_mounts = [*task_env, *store_env], store_identity(config)[1]
    agent_mounts = [{"name": "home", "mountPath": AGENT_HOME},
                    {"name": "task", "mountPath": "/root/data", "subPath": "data", "readOnly": True},
                    {"name": "results", "mountPath": "/root/results"}, {"name": "logs", "mountPath": "/logs/agent"},
                    {"name": "run", "mountPath": RUN_DIR}, {"name": "tmp", "mountPath": "/tmp"}]
    for mount, folder in sorted(plan.binds.items()):
        agent_mounts.append({"name": "task", "mountPath": mount, "subPath": folder, "readOnly": True})
    env: list[Manifest] = [{"name": k, "value": v} for k, v in sorted(agent_env(plan).items())]
    if plan.needs_gateway:
        secret = {"name": token_secret_name(job_name), "key": TOKEN_KEY}
        env.append({"name": "OPENAI_BASE_URL", "value": config.gateway_url})
        env.append({"name": "ANTHROPIC_BASE_URL", "value": config.gateway_url.removesuffix("/v1")})
        env += [{"name": name, "valueFrom": {"secretKeyRef": dict(secret)}} for name in TOKEN_ENV]
    named_labels, names = name_labels(trial=name, campaign=campaign)
    labels = {**MANAGED_BY, **named_labels, LABEL_ROLE: "trial"}
    job_labels = {**labels, **queue_labels(trial_queue(spec, config), spec.workload_priority_class)}
    network = agent_network(plan, config, gateway_address)
    sidecar = _sidecar(config, dest, {"artifacts": HELPER_RESULTS, "agent": HELPER_LOGS}, tmp="upload-tmp",
                       quotas={"artifacts": folder_quotas(limits)["results"], "agent": folder_quotas(limits)["logs"]})
    if network.get("dnsPolicy") == "None":
        sidecar["env"] += [{"name": RESOLVER_ENV, "value": ",".join(config.cluster_dns)},
                           {"name": SEARCH_ENV, "value": " ".join(config.cluster_dns_search)}]
    pod_labels = {**labels, **({LABEL_STORE_ACCESS: "true"} if plan.replay is not None else {})}
    pod_annotations = {"anchorage.dev/trial-namespace": trial["metadata"]["namespace"], **names,
                       ANNOTATION_TIMEOUT: str(timeout)}
    pod_spec = {
        "restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
        "terminationGracePeriodSeconds": config.upload_grace_sec, "securityContext": _pod_security(), **network,
        "initContainers": [
            {"name": "fetch-task", "image": config.task_image or config.operator_image,
             "command": ["python", "-m", "anchorage.runtime.kube.pod"], "args": fetch_args, "env": task_env,
             **({"envFrom": fetch_env_from} if fetch_env_from else {}), "securityContext": _restricted(),
             "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "100m", "memory": "256Mi"}},
             "volumeMounts": [{"name": "task", "mountPath": "/task"}, {"name": "results", "mountPath": HELPER_RESULTS},
                              {"name": "tmp", "mountPath": "/tmp"}, *fetch_mounts]},
            *_cli_check(plan, spec.agent.image or config.agent_image),
            # the sidecar holds the store's credentials: it shares nothing writable with the agent but what it uploads
            sidecar,
            *_await_policy(plan, config),
        ],
        "containers": [{
            "name": "agent", "image": spec.agent.image or config.agent_image, "command": wrapped, "env": env,
            "workingDir": "/root", "resources": _resources(limits, config),
            "securityContext": _restricted(seccomp=config.agent_seccomp_profile), "volumeMounts": agent_mounts,
        }],
        "volumes": [{"name": v, "emptyDir": {}} for v in ("task", "run", "upload-tmp")]
        + writable_volumes(limits),
    }
    runtime_class = spec.runtime_class_name or config.runtime_class_name
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class
    pod_spec.update(scheduling(config))
    _with_identity(pod_spec, config)
    metadata: Manifest = {"name": job_name, "namespace": ns, "labels": job_labels,
                          "annotations": {"anchorage.dev/trial-namespace": trial["metadata"]["namespace"], **names}}
    if ns == trial["metadata"]["namespace"]:
        metadata["ownerReferences"] = [owner_ref(trial)]
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": timeout + platform_allowance(config),
                 "ttlSecondsAfterFinished": config.ttl_seconds_after_finished,
                 **queued(KUEUE_QUEUE_LABEL in job_labels),
                 "template": {"metadata": {"labels": pod_labels, "annotations": {
                     **pod_annotations, **identity_annotations(pod_spec)}}, "spec": pod_spec}},
    }


def _with_identity(pod_spec: Manifest, config: OperatorConfig) -> None:
    """Add :func:`pod_access` to a pod spec and the projected store token to its volumes (the store's containers
    already mount it: the upload sidecar by :func:`_sidecar`, a fetch-artifacts container by its builder)."""
    pod_spec.update(pod_access(config))
    pod_spec["volumes"] = [*pod_spec["volumes"], *store_identity(config)[2]]


def _template_metadata(labels: dict[str, str], pod_spec: Manifest) -> Manifest:
    annotations = identity_annotations(pod_spec)
    return {"labels": labels, **({"annotations": annotations} if annotations else {})}


def verifier_job(run: Manifest, *, task: str, artifacts: list[dict[str, Any]], out: str,
                 config: OperatorConfig, baseline: str | None, gates: bool, lean: bool = False,
                 profile: str | None = None) -> Manifest:
    """The Job scoring a ScoringRun's artifacts with the Anchorage scorer: no network, 180 s deadline.

    ``artifacts`` are ``{"uri", "entry", "seed", "out"}``: read from the store by an init container,
    scored by ``score`` (no credentials, no network), records uploaded by the sidecar.
    """
    ns = config.trials_namespace or run["metadata"]["namespace"]
    name = run["metadata"]["name"]
    fetch = ["fetch-artifacts", "--dest", SCRATCH_IN]
    score = ["score", "--task", task, "--src", SCRATCH_IN, "--out", "/scratch/out"]
    for i, art in enumerate(artifacts):
        fetch += ["--artifact", f"{i}={art['uri']}"]
        score += ["--item", f"{i}={art['out']}"]
    if baseline:
        score += ["--baseline", baseline]
    if not gates:
        score.append("--no-gates")
    if lean:
        score.append("--lean")
    score += ["--profile", profile] if profile else []  # none: the default profile
    env, env_from = _storage_env(config, out)
    copy_task, task_env = _task_source(config, task)
    mounts = [{"name": "work", "mountPath": "/scratch"}, {"name": "tmp", "mountPath": "/tmp"}]
    small = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "500m", "memory": "1Gi"}}
    sidecar = _sidecar(config, out, {"": "/scratch/out"}, marker="verifier-upload.json")
    token_mounts = store_identity(config)[1]
    sidecar["volumeMounts"] = [{"name": "work", "mountPath": "/scratch", "readOnly": True},
                               {"name": "run", "mountPath": RUN_DIR}, {"name": "tmp", "mountPath": "/tmp"}, *token_mounts]
    named_labels, names = name_labels(scoring_run=name, campaign=named(run["metadata"], LABEL_CAMPAIGN))
    labels = {**MANAGED_BY, **named_labels, LABEL_ROLE: "verifier", LABEL_NETWORK: "none", LABEL_STORE_ACCESS: "true"}
    pod_spec = {
        "restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
        "terminationGracePeriodSeconds": config.upload_grace_sec, "securityContext": _pod_security(),
        "initContainers": [
            {"name": "fetch-artifacts", "image": config.operator_image,
             "command": ["python", "-m", "anchorage.runtime.kube.pod"], "args": fetch, "env": env, "envFrom": env_from,
             "securityContext": _restricted(), "resources": small, "volumeMounts": [*mounts, *token_mounts]},
            *copy_task,
            sidecar,
        ],
        "containers": [{
            "name": "score", "image": config.verifier_image,
            "command": timed("score", ["python", "-m", "anchorage.runtime.kube.pod", *score],
                             config.verifier_deadline_sec),
            "env": task_env, "securityContext": _restricted(), "resources": small,
            "volumeMounts": [*mounts, {"name": "run", "mountPath": RUN_DIR}],
        }],
        "volumes": [{"name": v, "emptyDir": {}} for v in ("work", "run", "tmp")],
        **scheduling(config),
    }
    _with_identity(pod_spec, config)
    metadata: Manifest = {"name": verifier_job_name(name), "namespace": ns, "labels": labels,
                          "annotations": {"anchorage.dev/scoring-run-namespace": run["metadata"]["namespace"], **names}}
    if ns == run["metadata"]["namespace"]:
        metadata["ownerReferences"] = [owner_ref(run)]
    metadata["labels"] = {**labels, **queue_labels(config.kueue_scoring_queue, None)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": config.verifier_deadline_sec + platform_allowance(config),
                     "ttlSecondsAfterFinished": config.ttl_seconds_after_finished,
                     **queued(bool(config.kueue_scoring_queue)),
                     "template": {"metadata": _template_metadata(labels, pod_spec), "spec": pod_spec}}}


PROTOCOL_DEADLINE = 3600


def protocol_job_name(trial: str, step: str) -> str:
    """The Job running ``verification.<step>`` of a trial."""
    return f"{trial}-{step}"


def protocol_job(trial: Manifest, *, step: str, task: str, settings: dict[str, Any], artifact: str | None,
                 config: OperatorConfig, campaign: str | None) -> Manifest:
    """The Job running a trial's ``verification.panel`` or ``.cbu`` (``kube.pod protocol``) on its uploaded results.

    Its own pod, its own gateway token (Secret ``<job>-gateway``, like an agent's), egress to the gateway only
    (role ``protocol``); the init container copies the trial's results in, the sidecar uploads
    ``outcome.json`` to ``<trial folder>/verifier/<step>/``.
    """
    meta = trial["metadata"]
    ns = config.trials_namespace or meta["namespace"]
    name = protocol_job_name(meta["name"], step)
    prefix = trial_prefix(meta["namespace"], meta["name"], campaign)
    out = f"{prefix}/verifier/{step}"
    env, env_from = _storage_env(config, out)
    copy_task, task_env = _task_source(config, task)
    secret = {"name": token_secret_name(name), "key": TOKEN_KEY}
    gateway_env = [{"name": "OPENAI_BASE_URL", "value": config.gateway_url},
                   {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": secret}}]
    args = ["protocol", "--step", step, "--task", task, "--settings", json.dumps(settings, separators=(",", ":")),
            "--src", f"{SCRATCH_IN}/0", "--out", "/scratch/out"]
    if artifact:
        args += ["--artifact", artifact]
    mounts = [{"name": "work", "mountPath": "/scratch"}, {"name": "tmp", "mountPath": "/tmp"}]
    small = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "500m", "memory": "1Gi"}}
    sidecar = _sidecar(config, out, {"": "/scratch/out"})
    token_mounts = store_identity(config)[1]
    sidecar["volumeMounts"] = [{"name": "work", "mountPath": "/scratch", "readOnly": True},
                               {"name": "run", "mountPath": RUN_DIR}, {"name": "tmp", "mountPath": "/tmp"}, *token_mounts]
    labels = {**MANAGED_BY, LABEL_TRIAL: meta["name"], LABEL_ROLE: "protocol", LABEL_STEP: step,
              LABEL_STORE_ACCESS: "true"}
    if campaign:
        labels[LABEL_CAMPAIGN] = campaign
    pod_spec = {
        "restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
        "terminationGracePeriodSeconds": config.upload_grace_sec, "securityContext": _pod_security(),
        "initContainers": [
            {"name": "fetch-artifacts", "image": config.operator_image,
             "command": ["python", "-m", "anchorage.runtime.kube.pod"],
             "args": ["fetch-artifacts", "--dest", SCRATCH_IN, "--artifact", f"0={prefix}/artifacts"],
             "env": env, "envFrom": env_from, "securityContext": _restricted(), "resources": small,
             "volumeMounts": [*mounts, *token_mounts]},
            *copy_task,
            sidecar,
        ],
        "containers": [{
            "name": "protocol", "image": config.operator_image,
            "command": signalled("protocol", ["python", "-m", "anchorage.runtime.kube.pod", *args]),
            "env": [*task_env, *gateway_env], "securityContext": _restricted(), "resources": small,
            "volumeMounts": [*mounts, {"name": "run", "mountPath": RUN_DIR}],
        }],
        "volumes": [{"name": v, "emptyDir": {}} for v in ("work", "run", "tmp")],
        **scheduling(config),
    }
    _with_identity(pod_spec, config)
    metadata: Manifest = {"name": name, "namespace": ns, "labels": labels,
                          "annotations": {"anchorage.dev/trial-namespace": meta["namespace"]}}
    if ns == meta["namespace"]:
        metadata["ownerReferences"] = [owner_ref(trial)]
    metadata["labels"] = {**labels, **queue_labels(config.kueue_scoring_queue, None)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": PROTOCOL_DEADLINE,
                     "ttlSecondsAfterFinished": config.ttl_seconds_after_finished,
                     **queued(bool(config.kueue_scoring_queue)),
                     "template": {"metadata": _template_metadata(labels, pod_spec), "spec": pod_spec}}}


#: The trials namespace's NetworkPolicies by name (:func:`network_policies`): P1, P2, P3 of docs/design-notes.md.
POLICY_DENY, POLICY_GATEWAY, POLICY_STORE = "anchorage-default-deny", "anchorage-gateway-egress", "anchorage-store-egress"


def network_policies(namespace: str, config: OperatorConfig) -> list[Manifest]:
    """The NetworkPolicies of a trials namespace — the one definition: the chart renders the same
    (``templates/trials-networkpolicies.yaml``, compared in ``tests/charts``) and the operator keeps these in place
    (``anchorage.controller.policies``: a deleted or edited one comes back).

    * P1 ``anchorage-default-deny``: no ingress and no egress for every pod the operator creates
      (``app.kubernetes.io/managed-by=anchorage``);
    * P2 ``anchorage-gateway-egress``: trial and protocol pods reach the gateway pods' model port (named ``http``; not
      its admin port), nothing else;
    * P3 ``anchorage-store-egress`` (only with ``store_egress``): pods labelled ``anchorage.dev/store-access=true``
      reach the cluster DNS (a store is reached by name) and the store (``store_egress``'s rules). A trial pod gets
      that label only once its agent has ended; verifier, protocol and replay pods have it from the start.

    Policies add up, so a trial's agent reaches the gateway's model port and nothing else, and a verifier DNS and
    the store.
    """
    gateway_peer: Manifest = {"podSelector": {"matchLabels": dict(config.gateway_selector)}}
    if config.gateway_namespace:
        gateway_peer["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": config.gateway_namespace}}
    dns_peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": dict(config.dns_selector)}}
    meta = {"namespace": namespace, "labels": dict(MANAGED_BY)}
    kind = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy"}
    policies: list[Manifest] = [
        {**kind, "metadata": {"name": POLICY_DENY, **meta},
         "spec": {"podSelector": {"matchLabels": dict(MANAGED_BY)}, "policyTypes": ["Ingress", "Egress"],
                  "ingress": [], "egress": []}},
        {**kind, "metadata": {"name": POLICY_GATEWAY, **meta},
         "spec": {"podSelector": {"matchExpressions": [
             {"key": key, "operator": "In", "values": [value]} for key, value in MANAGED_BY.items()] + [
             {"key": LABEL_ROLE, "operator": "In", "values": ["trial", "protocol"]}]},
             "policyTypes": ["Egress"],
             "egress": [{"to": [gateway_peer], "ports": [{"protocol": "TCP", "port": GATEWAY_MODEL_PORT}]}]}},
    ]
    if config.store_egress:
        policies.append(
            {**kind, "metadata": {"name": POLICY_STORE, **meta},
             "spec": {"podSelector": {"matchLabels": {**MANAGED_BY, LABEL_STORE_ACCESS: "true"}},
                      "policyTypes": ["Egress"],
                      "egress": [{"to": [dns_peer], "ports": [{"protocol": "UDP", "port": 53},
                                                              {"protocol": "TCP", "port": 53}]},
                                 *config.store_egress]}})
    return policies


def child_trial(campaign: Manifest, name: str, spec: TrialSpec) -> Manifest:
    """A campaign's Trial, owned by the campaign (deleting the campaign deletes it), with :data:`JOBS_FINALIZER`."""
    body = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    labels, annotations = name_labels(campaign=campaign["metadata"]["name"])
    return {"apiVersion": API, "kind": "Trial",
            "metadata": {"name": name, "namespace": campaign["metadata"]["namespace"],
                         "labels": {**MANAGED_BY, **labels}, "annotations": annotations,
                         "ownerReferences": [owner_ref(campaign)], "finalizers": [JOBS_FINALIZER]},
            "spec": body}


def child_scoring_run(trial: Manifest, name: str, verification: dict[str, Any],
                      scoring: dict[str, Any] | None = None) -> Manifest:
    """The ScoringRun of a finished Trial, owned by it (scored under the Trial's ``scoring.profile``), with
    :data:`JOBS_FINALIZER`."""
    named_labels, annotations = name_labels(trial=trial["metadata"]["name"], campaign=named(trial["metadata"],
                                                                                             LABEL_CAMPAIGN))
    return {"apiVersion": API, "kind": "ScoringRun",
            "metadata": {"name": name, "namespace": trial["metadata"]["namespace"],
                         "labels": {**MANAGED_BY, **named_labels}, "annotations": annotations,
                         "ownerReferences": [owner_ref(trial)], "finalizers": [JOBS_FINALIZER]},
            "spec": {"trialRef": trial["metadata"]["name"], "verification": verification,
                     **({"scoring": scoring} if scoring else {})}}
