"""``anchorage operator``: run the kopf operator (the same as ``kopf run -m anchorage.controller``).

Registered by ``anchorage.cli``. Flags become the operator's ``OperatorConfig`` (:func:`operator_config`,
passed to the handlers through ``ANCHORAGE_OPERATOR_CONFIG``); watches are namespaced (``--namespace``,
repeatable) or cluster-wide (``--all-namespaces``), objects in namespaces no operator serves get a NotServed Event
(``--report-unserved``, ``anchorage.controller.unserved``), and logs are JSON lines by default. The gateway flags
say where trial pods reach the model
gateway and which pods the trials' NetworkPolicy lets them talk to; the two gateway secrets come from the
environment only (``ANCHORAGE_GATEWAY_TOKEN_SECRET``, ``ANCHORAGE_GATEWAY_ADMIN_TOKEN``).
``--metrics-port`` serves Prometheus ``/metrics`` (collectors of ``anchorage.metrics``, fed by the
handlers) from a background thread started before kopf runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from anchorage.runtime.kube.jobs import OperatorConfig


def run_operator(
    namespace: list[str] = typer.Option(["default"], "--namespace", "-n",
                                        help="Namespace to watch (repeatable); the trials namespace is added."),
    all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A",
                                        help="Serve every namespace (cluster-wide watches and peering); --namespace "
                                             "is then ignored."),
    report_unserved: bool = typer.Option(True, "--report-unserved/--no-report-unserved",
                                         help="Post a NotServed Warning Event on Trials, ScoringRuns and campaigns in "
                                              "namespaces no operator serves (a cluster-wide list and watch of them)."),
    store: str = typer.Option("file://./runs", "--store", help="Artifact store root (file:// or s3://)."),
    trials_namespace: str = typer.Option("", "--trials-namespace", help="Namespace of Jobs (default: the CR's)."),
    storage_secret: str = typer.Option("", "--storage-secret", help="Secret with store credentials (sidecars only)."),
    store_endpoint_url: str = typer.Option("", "--store-endpoint-url",
                                           help="S3 endpoint of the pods' store clients (AWS_ENDPOINT_URL_S3; default: AWS)."),
    store_region: str = typer.Option("", "--store-region", help="S3 region of the pods' store clients."),
    store_service_account: str = typer.Option(
        "", "--store-service-account", help="ServiceAccount (trials namespace) of trial, verifier and protocol pods: its "
        "token, projected with --store-token-audience, reaches only the containers that use the store (web identity: "
        "AWS_WEB_IDENTITY_TOKEN_FILE), never the agent. Default: no account token in any container."),
    store_token_audience: str = typer.Option("", "--store-token-audience",
                                             help="Audience of that token (default: sts.amazonaws.com)."),
    store_token_seconds: int = typer.Option(3600, "--store-token-seconds", min=600,
                                            help="Lifetime of that token (the kubelet renews it)."),
    store_role_arn: str = typer.Option("", "--store-role-arn",
                                       help="Role the store's containers assume with that token (AWS_ROLE_ARN)."),
    image_pull_secret: list[str] = typer.Option([], "--image-pull-secret", metavar="NAME",
                                                help="Pull secret (trials namespace) of trial, verifier and protocol "
                                                     "pods (repeatable)."),
    kueue_queue: str = typer.Option("", "--kueue-queue", help="Kueue LocalQueue of trial Jobs whose Trial names none "
                                    "(spec.queueName); they are Queued until Kueue admits them."),
    kueue_scoring_queue: str = typer.Option("", "--kueue-scoring-queue", help="Kueue LocalQueue of verifier, panel and "
                                            "CBU Jobs (default: not queued)."),
    runtime_class_name: str = typer.Option(
        "", "--runtime-class-name", help="RuntimeClass of trial pods (e.g. gvisor, kata) unless a Trial or campaign "
        "names its own (spec.runtimeClassName)."),
    node_selector: list[str] = typer.Option([], "--node-selector", metavar="KEY=VALUE",
                                            help="nodeSelector of trial, verifier and protocol pods (repeatable)."),
    tolerations: str = typer.Option("", "--tolerations", metavar="JSON",
                                    help="Tolerations of trial, verifier and protocol pods (a JSON list)."),
    affinity: str = typer.Option("", "--affinity", metavar="JSON",
                                 help="Affinity of trial, verifier and protocol pods (a JSON object)."),
    priority_class_name: str = typer.Option("", "--priority-class-name",
                                            help="PriorityClass of trial, verifier and protocol pods."),
    cpu_request_ratio: float = typer.Option(1.0, "--cpu-request-ratio", min=0.01, max=1.0,
                                            help="An agent container's CPU request as a share of its limit (1: every "
                                                 "trial's CPUs reserved)."),
    task_source: str = typer.Option("", "--task-source", help="ANCHORAGE_TASKS for pods (task folders)."),
    task_image: str = typer.Option("", "--task-image",
                                   help="Task bundle image (images/tasks) the pods copy their task from."),
    agent_seccomp_profile: str = typer.Option(
        "", "--agent-seccomp-profile", help="seccomp profile of agent containers, relative to the kubelet's seccomp "
        "root (e.g. anchorage/agent.json: `python -m anchorage.runtime.seccomp_policy` prints it; every node of the "
        "pool must have it). Default: RuntimeDefault."),
    gateway_url: str = typer.Option("", "--gateway-url",
                                    help="Gateway URL for agents, ending in /v1 (default: "
                                         "http://anchorage-gateway.anchorage.svc:8080/v1)."),
    gateway_admin_url: str = typer.Option("", "--gateway-admin-url",
                                          help="Base URL of the gateway's admin listener, /admin/v1 (default: "
                                               "--gateway-url's host on port 9090)."),
    gateway_namespace: str = typer.Option("", "--gateway-namespace",
                                          help="Namespace of the gateway pods (NetworkPolicy peer; default: the "
                                               "trials namespace)."),
    gateway_selector: list[str] = typer.Option([], "--gateway-selector", metavar="KEY=VALUE",
                                               help="Label of the gateway pods (repeatable; default: "
                                                    "app.kubernetes.io/name=anchorage-gateway)."),
    dns_selector: list[str] = typer.Option([], "--dns-selector", metavar="KEY=VALUE",
                                           help="Label of the cluster DNS pods in kube-system (repeatable; default: "
                                                "k8s-app=kube-dns): the store's egress policy lets pods reach them."),
    store_egress: str = typer.Option("", "--store-egress", metavar="JSON",
                                     help="Egress rules to the artifact store (a JSON list of NetworkPolicyEgressRule) "
                                          "for the pods labelled anchorage.dev/store-access (default: none)."),
    cluster_dns: list[str] = typer.Option([], "--cluster-dns", metavar="IP",
                                          help="Cluster DNS server a trial pod's upload sidecar resolves the store with "
                                               "(repeatable; default: this pod's own nameservers, when it runs in one)."),
    upload_grace: int = typer.Option(120, "--upload-grace", min=10, max=3600,
                                     help="terminationGracePeriodSeconds of the pods: the upload's time after the "
                                          "main container."),
    unschedulable_after: int = typer.Option(600, "--unschedulable-after", min=10,
                                            help="Seconds a trial pod may stay unschedulable (or refused by a "
                                                 "ResourceQuota) before its attempt ends InfrastructureFailed."),
    start_after: int = typer.Option(120, "--start-after", min=10,
                                    help="Seconds a trial pod's container may fail to start (image pull, missing "
                                         "Secret) before its attempt ends InfrastructureFailed."),
    node_lost_after: int = typer.Option(60, "--node-lost-after", min=0,
                                        help="Seconds the pods tolerate a lost node's taints before they are evicted."),
    require_enforcement: bool = typer.Option(
        True, "--require-enforcement/--no-require-enforcement",
        help="Start trials only in namespaces where a probe confirmed that NetworkPolicies are enforced."),
    operator_image: str = typer.Option("", "--operator-image", help="Image of the fetch and upload containers."),
    agent_image: str = typer.Option("", "--agent-image", help="Default agent image (a Trial's agent.image wins)."),
    verifier_image: str = typer.Option("", "--verifier-image", help="Image of the verifier (scorer)."),
    standalone: bool = typer.Option(False, "--standalone", help="No peering (several replicas would clash)."),
    priority: int = typer.Option(0, "--priority",
                                 help="Peering priority: the highest live one handles objects, lower ones pause "
                                      "(equal priorities all pause). Needs crds/peering/ and a KopfPeering 'anchorage'."),
    peering_lifetime: int = typer.Option(60, "--peering-lifetime", min=1,
                                         help="Seconds a peer counts as alive after its last keep-alive (how long a "
                                              "standby waits for an operator killed without notice)."),
    liveness: str = typer.Option("", "--liveness", help="Liveness endpoint, e.g. http://0.0.0.0:8080/healthz."),
    log_format: str = typer.Option("json", "--log-format", help="json, full or plain."),
    verbose: bool = typer.Option(False, "--verbose", help="Debug logs."),
    metrics_port: int | None = typer.Option(None, "--metrics-port", min=0, max=65535,
                                            help="Serve Prometheus /metrics on this port (0 picks one; default: off)."),
    metrics_addr: str = typer.Option("127.0.0.1", "--metrics-addr",
                                     help="Address of /metrics (0.0.0.0 in a pod, for the PodMonitor)."),
) -> None:
    """Run the Kubernetes operator for Trials, ScoringRuns and VerificationCampaigns.

    Model-calling trials need ANCHORAGE_GATEWAY_TOKEN_SECRET (HMAC secret shared with the gateway) in the env.

    With ANCHORAGE_GATEWAY_ADMIN_TOKEN the operator revokes each trial's token and records its tokens and cost.

    Without it their cost is recorded as unknown.
    """
    import kopf

    cfg = operator_config(store=store, trials_namespace=trials_namespace, storage_secret=storage_secret,
                          store_endpoint_url=store_endpoint_url, store_region=store_region,
                          store_service_account=store_service_account, store_token_audience=store_token_audience,
                          store_role_arn=store_role_arn, image_pull_secrets=image_pull_secret,
                          store_token_seconds=str(store_token_seconds),
                          kueue_queue=kueue_queue, kueue_scoring_queue=kueue_scoring_queue,
                          runtime_class_name=runtime_class_name, task_source=task_source,
                          task_image=task_image, agent_seccomp_profile=agent_seccomp_profile,
                          gateway_url=gateway_url,
                          gateway_admin_url=gateway_admin_url, gateway_namespace=gateway_namespace,
                          gateway_selector=gateway_selector, operator_image=operator_image, agent_image=agent_image,
                          verifier_image=verifier_image, node_selector=node_selector, tolerations=tolerations,
                          affinity=affinity, priority_class_name=priority_class_name,
                          cpu_request_ratio=str(cpu_request_ratio) if cpu_request_ratio != 1.0 else "",
                          dns_selector=dns_selector, store_egress=store_egress,
                          cluster_dns=cluster_dns or pod_nameservers(),
                          upload_grace_sec=str(upload_grace), unschedulable_after_sec=str(unschedulable_after),
                          start_after_sec=str(start_after), node_lost_after_sec=str(node_lost_after),
                          require_enforcement="" if require_enforcement else "false")
    os.environ["ANCHORAGE_OPERATOR_CONFIG"] = cfg.model_dump_json()
    namespaces = [] if all_namespaces else sorted({*namespace, *([trials_namespace] if trials_namespace else [])})
    os.environ["ANCHORAGE_WATCH_NAMESPACES"] = ",".join(namespaces)  # the Jobs' own watch (controller.watching)
    os.environ["ANCHORAGE_REPORT_UNSERVED"] = "1" if report_unserved else "0"  # controller.unserved
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat[log_format.upper()])
    import anchorage.controller  # noqa: F401  (registers the handlers)

    if metrics_port is not None:
        _serve_metrics(metrics_port, metrics_addr)

    settings = kopf.OperatorSettings()
    settings.peering.lifetime = peering_lifetime
    kopf.run(standalone=standalone, namespaces=namespaces, peering_name="anchorage", priority=priority,
             settings=settings, liveness_endpoint=liveness or None, clusterwide=all_namespaces)


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    pairs = [item.partition("=") for item in items]
    bad = [item for item, (key, eq, _) in zip(items, pairs, strict=True) if not key or not eq]
    if bad:
        raise typer.BadParameter(f"{bad[0]!r} is not KEY=VALUE (e.g. app.kubernetes.io/name=anchorage-gateway)",
                                 param_hint=flag)
    return {key: value for key, _, value in pairs}


def _json(text: str, flag: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"not JSON ({exc}): {text[:80]!r}", param_hint=flag) from exc


#: The resolver configuration of a pod (``ClusterFirst``: the cluster DNS server first).
RESOLV_CONF = Path("/etc/resolv.conf")


def pod_nameservers(path: Path = RESOLV_CONF) -> list[str]:
    """The nameservers of this process's resolver when it runs in a pod (``KUBERNETES_SERVICE_HOST`` is set): the
    cluster DNS; [] elsewhere (a laptop's resolver is nothing a pod can use: ``--cluster-dns`` then)."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    return [parts[1] for parts in (line.split() for line in lines) if len(parts) >= 2 and parts[0] == "nameserver"]


def operator_config(*, store: str, gateway_selector: list[str], node_selector: list[str] | None = None,
                    tolerations: str = "", affinity: str = "", image_pull_secrets: list[str] | None = None,
                    dns_selector: list[str] | None = None, store_egress: str = "",
                    cluster_dns: list[str] | None = None, **flags: str) -> OperatorConfig:
    """The ``OperatorConfig`` of the flags (empty strings: the model's defaults); bad flags raise typer.BadParameter."""
    from pydantic import ValidationError

    from anchorage.runtime.kube.jobs import OperatorConfig

    if store.startswith("file://") and not store.startswith("file:///"):
        store = "file://" + str(Path(store.removeprefix("file://")).resolve())
    values: dict[str, object] = {"store_uri": store, **{k: v for k, v in flags.items() if v}}
    if gateway_selector:
        values["gateway_selector"] = _pairs(gateway_selector, "--gateway-selector")
    if node_selector:
        values["node_selector"] = _pairs(node_selector, "--node-selector")
    if image_pull_secrets:
        values["image_pull_secrets"] = list(image_pull_secrets)
    if dns_selector:
        values["dns_selector"] = _pairs(dns_selector, "--dns-selector")
    if cluster_dns:
        values["cluster_dns"] = list(cluster_dns)
    if store_egress:
        rules = _json(store_egress, "--store-egress")
        if not isinstance(rules, list) or not all(isinstance(rule, dict) for rule in rules):
            raise typer.BadParameter("not a JSON list of NetworkPolicyEgressRule objects (e.g. "
                                     '\'[{"ports": [{"protocol": "TCP", "port": 443}]}]\')', param_hint="--store-egress")
        values["store_egress"] = rules
    if tolerations:
        values["tolerations"] = _json(tolerations, "--tolerations")
    if affinity:
        values["affinity"] = _json(affinity, "--affinity")
    url = str(values.get("gateway_url", ""))
    if url and not url.rstrip("/").endswith("/v1"):
        raise typer.BadParameter(f"{url!r} must end in /v1 (agents append /chat/completions to it)",
                                 param_hint="--gateway-url")
    try:
        return OperatorConfig.model_validate(values)
    except ValidationError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _serve_metrics(port: int, addr: str) -> None:
    """Start ``/metrics`` (a daemon thread: it ends with the operator) and say where it listens."""
    from anchorage import metrics

    server = metrics.serve(port, addr=addr)
    typer.echo(f"metrics on http://{addr}:{server.port}/metrics", err=True)


def register(app: typer.Typer) -> None:
    """Add the ``operator`` command to ``anchorage``."""
    app.command("operator")(run_operator)
