"""``anchorage operator``: run the kopf operator (the same as ``kopf run -m anchorage.controller``).

Registered by ``anchorage.cli``. Flags become the operator's ``OperatorConfig`` (passed to the
handlers through ``ANCHORAGE_OPERATOR_CONFIG``); watches are namespaced (``--namespace``, repeatable)
and logs are JSON lines by default. ``--metrics-port`` serves Prometheus ``/metrics`` (collectors of
``anchorage.metrics``, fed by the handlers) from a background thread started before kopf runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer


def run_operator(
    namespace: list[str] = typer.Option(["default"], "--namespace", "-n",
                                        help="Namespace to watch (repeatable); the trials namespace is added."),
    store: str = typer.Option("file://./runs", "--store", help="Artifact store root (file:// or s3://)."),
    trials_namespace: str = typer.Option("", "--trials-namespace", help="Namespace of Jobs (default: the CR's)."),
    storage_secret: str = typer.Option("", "--storage-secret", help="Secret with store credentials (sidecars only)."),
    kueue_queue: str = typer.Option("", "--kueue-queue", help="Kueue LocalQueue to label Jobs with."),
    task_source: str = typer.Option("", "--task-source", help="ANCHORAGE_TASKS for pods (task folders)."),
    standalone: bool = typer.Option(False, "--standalone", help="No peering (several replicas would clash)."),
    liveness: str = typer.Option("", "--liveness", help="Liveness endpoint, e.g. http://0.0.0.0:8080/healthz."),
    log_format: str = typer.Option("json", "--log-format", help="json, full or plain."),
    verbose: bool = typer.Option(False, "--verbose", help="Debug logs."),
    metrics_port: int | None = typer.Option(None, "--metrics-port", min=0, max=65535,
                                            help="Serve Prometheus /metrics on this port (0 picks one; default: off)."),
    metrics_addr: str = typer.Option("127.0.0.1", "--metrics-addr",
                                     help="Address of /metrics (0.0.0.0 in a pod, for the PodMonitor)."),
) -> None:
    """Run the Kubernetes operator for Trials, ScoringRuns and VerificationCampaigns."""
    import kopf

    from anchorage.runtime.kubejobs import OperatorConfig

    if store.startswith("file://") and not store.startswith("file:///"):
        store = "file://" + str(Path(store.removeprefix("file://")).resolve())
    cfg = OperatorConfig(store_uri=store, trials_namespace=trials_namespace or None,
                         storage_secret=storage_secret or None, kueue_queue=kueue_queue or None,
                         task_source=task_source or None)
    os.environ["ANCHORAGE_OPERATOR_CONFIG"] = cfg.model_dump_json()
    namespaces = sorted({*namespace, *([trials_namespace] if trials_namespace else [])})
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat[log_format.upper()])
    import anchorage.controller  # noqa: F401  (registers the handlers)

    if metrics_port is not None:
        _serve_metrics(metrics_port, metrics_addr)

    kopf.run(standalone=standalone, namespaces=namespaces, peering_name="anchorage",
             liveness_endpoint=liveness or None, clusterwide=False)


def _serve_metrics(port: int, addr: str) -> None:
    """Start ``/metrics`` (a daemon thread: it ends with the operator) and say where it listens."""
    from anchorage import metrics

    server = metrics.serve(port, addr=addr)
    typer.echo(f"metrics on http://{addr}:{server.port}/metrics", err=True)


def register(app: typer.Typer) -> None:
    """Add the ``operator`` command to ``anchorage``."""
    app.command("operator")(run_operator)
