"""The Helm chart linted and rendered with the Helm library: valid objects, strict security, the wiring to
the operator's and the gateway's own code (CLI flags, NetworkPolicies, gateway config, CRDs)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import kubernetes_validate
import pytest
import typer
import yaml
from jsonschema import Draft7Validator

from anchorage.gateway.gatewayconfig import GatewayConfig
from anchorage.runtime.kube.jobs import OperatorConfig, network_policies
from charts.conftest import NAMESPACE, Rendered
from charts.customobjects import custom_object_errors

K8S = "1.30.0"
Render = Callable[..., Rendered]

FULL: dict[str, Any] = {
    "image": {"digest": "sha256:" + "a" * 64},
    "store": {"credentialsSecret": "s3-creds", "endpointUrl": "http://minio.minio.svc:9000", "region": "eu-west-1"},
    "operator": {"peering": {"priority": 7, "lifetime": 30}, "watchNamespaces": ["team-a", "team-b"], "kueueQueue": "evals",
                 "kueueScoringQueue": "scoring",
                 "taskSource": "/opt/tasks", "verbose": True},
    "gateway": {"mock": False, "tokenSecret": {"name": "gateway", "key": "token"},
                "adminTokenSecret": {"name": "gateway", "key": "admin"}, "defaultBudgetUSD": 5,
                "defaultRatePerMin": 60, "ledger": {"persistence": {"enabled": True, "storageClassName": "fast"}},
                "upstreams": [
                    {"name": "openai", "baseUrl": "https://api.openai.com", "models": ["gpt-*"],
                     "apiKeySecret": {"name": "provider-keys", "key": "openai"}, "reasoningInOutput": False},
                    {"name": "anthropic", "baseUrl": "https://api.anthropic.com", "api": "anthropic",
                     "models": ["claude-*"], "apiKeySecret": {"name": "provider-keys", "key": "anthropic"}}]},
    "trials": {"networkPolicies": {"extraEgress": [
        {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}], "ports": [{"protocol": "TCP", "port": 9000}]}]}},
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus"}},
                "podMonitor": {"enabled": True}},
    "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus"}},
}
MINIMAL: dict[str, Any] = {
    "crds": {"enabled": False}, "gateway": {"enabled": False}, "dashboards": {"enabled": False},
    "trials": {"createNamespace": False, "networkPolicies": {"enabled": False}}, "tests": {"enabled": False},
}
VALUE_SETS = {"defaults": {}, "full": FULL, "minimal": MINIMAL, "crds-not-kept": {"crds": {"keep": False}},
              "standalone": {"operator": {"peering": {"enabled": False}}}}

# Prometheus Operator kinds are not in the Kubernetes schemas: checked against the fields we use.
_MONITOR_ENDPOINT = {"type": "object", "additionalProperties": False, "required": ["port"],
                     "properties": {"port": {"type": "string"}, "path": {"type": "string"},
                                    "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"}}}
_META = {"type": "object", "required": ["name", "namespace"]}
_SELECTOR = {"type": "object", "additionalProperties": False, "required": ["matchLabels"],
             "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}}
MONITORING_SCHEMAS: dict[str, dict[str, Any]] = {
    "ServiceMonitor": {"type": "object", "required": ["spec"], "properties": {"metadata": _META, "spec": {
        "type": "object", "additionalProperties": False, "required": ["selector", "endpoints"],
        "properties": {"selector": _SELECTOR, "endpoints": {"type": "array", "minItems": 1, "items": _MONITOR_ENDPOINT}}}}},
    "PodMonitor": {"type": "object", "required": ["spec"], "properties": {"metadata": _META, "spec": {
        "type": "object", "additionalProperties": False, "required": ["selector", "podMetricsEndpoints"],
        "properties": {"selector": _SELECTOR,
                       "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": _MONITOR_ENDPOINT}}}}},
    "PrometheusRule": {"type": "object", "required": ["spec"], "properties": {"metadata": _META, "spec": {
        "type": "object", "additionalProperties": False, "required": ["groups"],
        "properties": {"groups": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["name", "rules"], "properties": {"rules": {"type": "array"}}}}}}}},
}


@pytest.fixture(params=list(VALUE_SETS), ids=list(VALUE_SETS))
def rendered(request: pytest.FixtureRequest, render: Render) -> Rendered:
    return render(VALUE_SETS[request.param])


def pod_specs(rendered: Rendered) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in rendered.objects:
        if obj["kind"] == "Deployment":
            yield f"deployment/{obj['metadata']['name']}", obj["spec"]["template"]["spec"]
        elif obj["kind"] == "Pod":
            yield f"pod/{obj['metadata']['name']}", obj["spec"]


def container(rendered: Rendered, deployment: str) -> dict[str, Any]:
    containers: list[dict[str, Any]] = rendered.one("Deployment", deployment)["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


# ----- lint and validity -----------------------------------------------------------------------------


def test_lint_reports_no_warning_or_error(helm: Any, chart_dir: Path) -> None:
    config = helm.Configuration(namespace=NAMESPACE, kubeconfig="/dev/null")
    result = asyncio.run(helm.Lint(config).run(str(chart_dir)))
    assert result["TotalChartsLinted"] == 1
    assert not result["Errors"], result
    # Helm's severities: 1 info (e.g. "icon is recommended"), 2 warning, 3 error.
    assert [m for m in result["Messages"] if m["Severity"] >= 2] == []


def test_every_object_is_valid_against_the_kubernetes_schemas(rendered: Rendered, repo_root: Path) -> None:
    assert rendered.objects
    for obj in rendered.objects:
        kind = obj["kind"]
        if obj["apiVersion"].startswith("kopf.dev/"):  # kopf's peering CRD, crds/peering/
            crd = yaml.safe_load((repo_root / "crds" / "peering" / "kopf.dev_kopfpeerings.yaml").read_text())
            assert custom_object_errors(obj, crd, K8S) == [], f"{kind}/{obj['metadata']['name']}"
        elif obj["apiVersion"].startswith("monitoring.coreos.com/"):
            print(f"{kind}/{obj['metadata']['name']}: monitoring.coreos.com is not in the Kubernetes schemas; "
                  "validated against the chart tests' own schema of the fields used")
            errors = [e.message for e in Draft7Validator(MONITORING_SCHEMAS[kind]).iter_errors(obj)]
            assert errors == [], f"{kind}: {errors}"
        else:
            kubernetes_validate.validate(obj, K8S, strict=True)


def test_every_object_carries_the_chart_labels(rendered: Rendered) -> None:
    for obj in rendered.objects:
        labels = obj["metadata"].get("labels") or {}
        assert labels.get("app.kubernetes.io/part-of") == "anchorage", f"{obj['kind']}/{obj['metadata']['name']}"


def test_pods_run_with_strict_security_defaults(rendered: Rendered) -> None:
    for where, spec in pod_specs(rendered):
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["seccompProfile"] == {"type": "RuntimeDefault"}, where
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert sc["runAsNonRoot"] is True and sc["privileged"] is False, where
            assert c["resources"]["limits"]["memory"], f"{where}: no memory limit"


# ----- operator --------------------------------------------------------------------------------------


def cli_params(command: str, args: list[str]) -> dict[str, Any]:
    """Parse ``args`` with the real ``anchorage <command>`` options (unknown flags raise)."""
    from anchorage.cli import app

    group = typer.main.get_command(app)
    cmd = group.commands[command]  # type: ignore[attr-defined]
    with cmd.make_context(command, list(args)) as ctx:
        params: dict[str, Any] = dict(ctx.params)
    return params


def test_operator_deployment_is_a_single_recreated_kopf_with_liveness(rendered: Rendered) -> None:
    if not rendered.of_kind("Deployment") or not any(
            d["metadata"]["name"] == "anchorage-operator" for d in rendered.of_kind("Deployment")):
        pytest.skip("operator disabled in this value set")
    deployment = rendered.one("Deployment", "anchorage-operator")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    operator = container(rendered, "anchorage-operator")
    assert operator["args"][0] == "operator"
    assert "--liveness=http://0.0.0.0:8080/healthz" in operator["args"]
    probe = operator["livenessProbe"]["httpGet"]
    port = next(p for p in operator["ports"] if p["name"] == probe["port"])
    assert probe["path"] == "/healthz" and port["containerPort"] == 8080
    params = cli_params("operator", operator["args"][1:])
    assert params["liveness"] == "http://0.0.0.0:8080/healthz"
    assert params["trials_namespace"] == "anchorage-trials"
    assert "anchorage-trials" in params["namespace"]


def test_operator_flags_follow_the_values(render: Render) -> None:
    args = container(render(FULL), "anchorage-operator")["args"]
    params = cli_params("operator", args[1:])
    assert sorted(params["namespace"]) == ["anchorage-trials", "team-a", "team-b"]
    assert (params["standalone"], params["priority"], params["peering_lifetime"]) == (False, 7, 30)  # peering
    assert (params["storage_secret"], params["kueue_queue"]) == ("s3-creds", "evals")
    assert params["task_image"] == "ghcr.io/anchorage/tasks:0.1.0" and params["task_source"] == ""  # the bundle wins
    unbundled = render({**FULL, "tasks": {"image": {"repository": ""}}})
    assert cli_params("operator", container(unbundled, "anchorage-operator")["args"][1:])["task_source"] == "/opt/tasks"
    assert params["kueue_scoring_queue"] == "scoring"
    defaults = cli_params("operator", container(render({}), "anchorage-operator")["args"][1:])
    assert (defaults["standalone"], defaults["priority"], defaults["peering_lifetime"]) == (False, 100, 60)
    standalone = container(render({"operator": {"peering": {"enabled": False}}}), "anchorage-operator")["args"]
    assert cli_params("operator", standalone[1:])["standalone"] is True
    assert not any(a.startswith(("--priority", "--peering-lifetime")) for a in standalone)


def test_trials_namespace_enforces_the_restricted_standard_and_runtime_class_reaches_the_pods(render: Render) -> None:
    namespace = next(n for n in render({}).of_kind("Namespace") if n["metadata"]["name"] == "anchorage-trials")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert operator_config(render({})).runtime_class_name is None
    assert operator_config(render({"trials": {"runtimeClassName": "gvisor"}})).runtime_class_name == "gvisor"


def test_store_credentials_only_by_secret_reference(render: Render) -> None:
    rendered = render(FULL)
    assert rendered.of_kind("Secret") == [], "the chart must never create Secrets (credentials by reference)"
    operator = container(rendered, "anchorage-operator")
    assert operator["envFrom"] == [{"secretRef": {"name": "s3-creds"}}]
    env = {e["name"]: e for e in operator["env"]}
    assert env["AWS_ENDPOINT_URL_S3"]["value"] == "http://minio.minio.svc:9000"  # S3 only: STS stays AWS's
    assert "envFrom" not in container(rendered, "anchorage-gateway"), "the gateway gets no store credentials"


# ----- gateway ---------------------------------------------------------------------------------------


def operator_config(rendered: Rendered, deployment: str = "anchorage-operator") -> OperatorConfig:
    """The OperatorConfig the rendered operator Deployment's args give (parsed by the real CLI, built by its code)."""
    from anchorage.commands.operator import operator_config as build

    params = cli_params("operator", container(rendered, deployment)["args"][1:])
    names = ("trials_namespace", "storage_secret", "kueue_queue", "kueue_scoring_queue", "task_source", "gateway_url",
             "gateway_admin_url", "gateway_namespace", "operator_image", "agent_image", "verifier_image",
             "runtime_class_name", "node_selector", "tolerations", "affinity", "priority_class_name", "task_image",
             "store_service_account", "store_token_audience", "store_role_arn", "dns_selector", "store_egress",
             "cluster_dns")
    seconds = {"upload_grace_sec": "upload_grace", "unschedulable_after_sec": "unschedulable_after",
               "start_after_sec": "start_after", "node_lost_after_sec": "node_lost_after"}
    return build(store=params["store"], gateway_selector=params["gateway_selector"],
                 image_pull_secrets=params["image_pull_secret"], store_token_seconds=str(params["store_token_seconds"]),
                 **{n: params[n] for n in names}, **{field: str(params[flag]) for field, flag in seconds.items()},
                 require_enforcement="" if params["require_enforcement"] else "false")


RELEASES = [("anchorage", NAMESPACE, {}), ("evals", "team-x", {}), ("evals", "team-x", FULL),
            ("lab", "ml-platform", {"fullnameOverride": "bench", "gateway": {"service": {"port": 9000}}})]


@pytest.mark.parametrize(("release", "namespace", "values"), RELEASES,
                         ids=["anchorage-in-anchorage", "evals-in-team-x", "evals-in-team-x-full", "override-and-port"])
def test_operator_flags_point_at_this_releases_gateway(render: Render, release: str, namespace: str,
                                                       values: dict[str, Any]) -> None:
    rendered = render(values, release=release, namespace=namespace)
    # the release-based prefix: the release name when it contains "anchorage", else "<release>-anchorage"
    prefix = values.get("fullnameOverride") or (release if "anchorage" in release else f"{release}-anchorage")
    config = operator_config(rendered, f"{prefix}-operator")
    service = rendered.one("Service", f"{prefix}-gateway")
    url = urlparse(config.gateway_url)
    port = service["spec"]["ports"][0]["port"]
    assert (url.hostname, url.port, url.path) == (f"{prefix}-gateway.{namespace}.svc", port, "/v1")
    # the admin API is the same Service on its admin port: the gateway's admin listener, not its model port
    admin = urlparse(config.admin_url())
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert (admin.hostname, admin.port) == (url.hostname, ports["admin"]["port"]) and admin.port != url.port
    gateway_ports = {p["name"]: p["containerPort"] for p in container(rendered, f"{prefix}-gateway")["ports"]}
    assert ports["admin"]["targetPort"] == "admin" and gateway_ports["admin"] != gateway_ports["http"]
    pods = rendered.one("Deployment", f"{prefix}-gateway")["spec"]["template"]["metadata"]["labels"]
    assert config.gateway_selector.items() <= pods.items() and config.gateway_selector == service["spec"]["selector"]
    assert config.gateway_selector["app.kubernetes.io/instance"] == release
    assert config.gateway_namespace == namespace
    # the trials' NetworkPolicy lets trial pods reach exactly these pods, in that namespace
    policy = rendered.one("NetworkPolicy", "anchorage-gateway-egress")
    (rule,) = policy["spec"]["egress"]
    (peer,) = rule["to"]
    assert peer["podSelector"]["matchLabels"] == config.gateway_selector
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": namespace}
    # ... on their model API port only (never the admin listener's /metrics and /admin/v1)
    assert rule["ports"] == [{"protocol": "TCP", "port": "http"}]
    # the fetch/upload containers run the chart's own image
    assert config.operator_image == container(rendered, f"{prefix}-gateway")["image"]


def test_operator_gets_the_gateway_secrets_and_image_overrides(render: Render) -> None:
    digest = "sha256:" + "b" * 64
    rendered = render({**FULL, "operator": {**FULL["operator"],
                                            "agentImage": {"repository": "registry.example/agent", "tag": "1"},
                                            "verifierImage": {"repository": "registry.example/verifier",
                                                              "digest": digest},
                                            "gateway": {"adminUrl": "http://gw-admin.ops.svc:9001"}}})
    config = operator_config(rendered)
    assert (config.agent_image, config.verifier_image) == ("registry.example/agent:1",
                                                           f"registry.example/verifier@{digest}")
    assert config.admin_url() == "http://gw-admin.ops.svc:9001"
    env = {e["name"]: e for e in container(rendered, "anchorage-operator")["env"]}
    assert env["ANCHORAGE_GATEWAY_TOKEN_SECRET"]["valueFrom"]["secretKeyRef"] == {"name": "gateway", "key": "token"}
    assert env["ANCHORAGE_GATEWAY_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "gateway", "key": "admin"}
    # the gateway uses the same two secrets, also when it serves only the mock (no config file)
    for values in (FULL, {"gateway": {"tokenSecret": {"name": "gw"}, "adminTokenSecret": {"name": "gw"}}}):
        gateway = container(render(values), "anchorage-gateway")
        params = cli_params("gateway", [a for a in gateway["args"][1:] if not a.startswith("--config")])
        assert (params["token_secret_env"], params["admin_token_env"]) == (
            "ANCHORAGE_GATEWAY_TOKEN_SECRET", "ANCHORAGE_GATEWAY_ADMIN_TOKEN")
        gw_env = {e["name"]: e for e in gateway["env"]}
        assert {"ANCHORAGE_GATEWAY_TOKEN_SECRET", "ANCHORAGE_GATEWAY_ADMIN_TOKEN"} <= gw_env.keys()


def test_every_image_follows_the_registry_value_and_takes_a_digest(render: Render) -> None:
    """global.imageRegistry alone moves every image the chart and the operator use (operator and gateway, task bundle,
    agent, verifier) to R/anchorage/<name> with the chart's tag; each also takes a digest, which wins."""
    registry = "10.200.3.1:5000"
    rendered = render({"global": {"imageRegistry": registry}})
    config = operator_config(rendered)
    deployment = next(d for d in rendered.of_kind("Deployment") if d["metadata"]["name"] == "anchorage-operator")
    init = {c["name"]: c["image"] for c in deployment["spec"]["template"]["spec"]["initContainers"]}
    expected = {name: f"{registry}/anchorage/{name}:0.1.0" for name in ("operator", "tasks", "agent-base", "verifier")}
    assert (config.operator_image, config.task_image, config.agent_image, config.verifier_image) == (
        expected["operator"], expected["tasks"], expected["agent-base"], expected["verifier"])
    assert init["tasks"] == expected["tasks"]
    assert {container(rendered, name)["image"] for name in ("anchorage-operator", "anchorage-gateway")} == {
        expected["operator"]}
    digests = {key: "sha256:" + char * 64 for key, char in (("image", "1"), ("tasks", "2"), ("agent", "3"),
                                                            ("verifier", "4"))}
    pinned = operator_config(render({
        "global": {"imageRegistry": registry}, "image": {"digest": digests["image"]},
        "tasks": {"image": {"digest": digests["tasks"]}},
        "operator": {"agentImage": {"digest": digests["agent"]}, "verifierImage": {"digest": digests["verifier"]}}}))
    assert (pinned.operator_image, pinned.task_image, pinned.agent_image, pinned.verifier_image) == (
        f"{registry}/anchorage/operator@{digests['image']}", f"{registry}/anchorage/tasks@{digests['tasks']}",
        f"{registry}/anchorage/agent-base@{digests['agent']}", f"{registry}/anchorage/verifier@{digests['verifier']}")


def test_pull_secrets_reach_every_pod_the_operator_creates(render: Render) -> None:
    """imagePullSecrets and global.imagePullSecrets: the chart's pods list them, and the operator gets them
    (--image-pull-secret) for trial, verifier and protocol pods."""
    rendered = render({"imagePullSecrets": ["team-pull"], "global": {"imagePullSecrets": [{"name": "mirror-pull"}]}})
    expected = [{"name": "team-pull"}, {"name": "mirror-pull"}]
    for deployment in rendered.of_kind("Deployment"):
        assert deployment["spec"]["template"]["spec"]["imagePullSecrets"] == expected
    config = operator_config(rendered)
    assert config.image_pull_secrets == ["team-pull", "mirror-pull"]
    assert operator_config(render({})).image_pull_secrets == []


def test_the_store_client_account_is_created_in_the_trials_namespace_and_named_to_the_operator(
        render: Render) -> None:
    annotations = {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/anchorage-store"}
    rendered = render({"store": {"serviceAccount": {"annotations": annotations, "tokenAudience": "my-audience"},
                                 "roleArn": "arn:aws:iam::123456789012:role/anchorage-store"}})
    account = next(a for a in rendered.of_kind("ServiceAccount")
                   if a["metadata"]["namespace"] == "anchorage-trials")
    assert account["metadata"]["name"] == "anchorage-store-client"
    assert account["metadata"]["annotations"] == annotations and account["automountServiceAccountToken"] is False
    config = operator_config(rendered)
    assert (config.store_service_account, config.store_token_audience, config.store_role_arn) == (
        "anchorage-store-client", "my-audience", "arn:aws:iam::123456789012:role/anchorage-store")
    none = render({"store": {"serviceAccount": {"create": False}}})
    assert not [a for a in none.of_kind("ServiceAccount") if a["metadata"]["namespace"] == "anchorage-trials"]
    assert operator_config(none).store_service_account is None
    named = operator_config(render({"store": {"serviceAccount": {"create": False, "name": "platform-made"}}}))
    assert named.store_service_account == "platform-made"


def test_disabled_parts_render_nothing(render: Render) -> None:
    rendered = render(MINIMAL)
    kinds = {o["kind"] for o in rendered.objects}
    assert not kinds & {"Service", "CustomResourceDefinition", "NetworkPolicy", "Namespace", "Pod"}
    assert [d["metadata"]["name"] for d in rendered.of_kind("Deployment")] == ["anchorage-operator"]
    assert rendered.of_kind("ConfigMap") == []


def test_gateway_prices_are_the_repositorys_snapshot(render: Render, repo_root: Path, chart_dir: Path) -> None:
    shipped = {p.name: p.read_text() for p in (chart_dir / "files" / "prices").glob("*.yaml")}
    assert shipped == {p.name: p.read_text() for p in (repo_root / "prices").glob("*.yaml")}, \
        "charts/anchorage/files/prices is stale: cp prices/*.yaml charts/anchorage/files/prices/"
    rendered = render({})
    assert rendered.one("ConfigMap", "anchorage-prices")["data"] == {k: v.rstrip("\n") for k, v in shipped.items()}
    gateway = container(rendered, "anchorage-gateway")
    mounts = {m["name"]: m["mountPath"] for m in gateway["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in gateway["env"]}
    assert env["ANCHORAGE_PRICES"] == mounts["prices"]


def test_gateway_config_is_valid_and_keys_come_from_secrets(render: Render, tmp_path: Path) -> None:
    rendered = render(FULL)
    text = rendered.one("ConfigMap", "anchorage-gateway")["data"]["gateway.yaml"]
    config = GatewayConfig.model_validate(yaml.safe_load(text))
    assert [u.name for u in config.upstreams] == ["openai", "anthropic"]
    assert config.upstreams[0].reasoning_in_output is False and config.upstreams[1].api == "anthropic"
    assert config.token_secret_env and config.admin_token_env and config.default_budget_usd == 5
    gateway = container(rendered, "anchorage-gateway")
    env = {e["name"]: e for e in gateway["env"]}
    for name in [u.api_key_env for u in config.upstreams] + [config.token_secret_env, config.admin_token_env]:
        assert name is not None and "secretKeyRef" in env[name]["valueFrom"], name
    assert all(u.api_key is None for u in config.upstreams), "no key material in the config"
    config_file = tmp_path / "gateway.yaml"
    config_file.write_text(text)
    args = [a.replace("/etc/anchorage/config/gateway.yaml", str(config_file)) for a in gateway["args"][1:]]
    assert cli_params("gateway", args)["mock"] is False


def test_gateway_is_one_recreated_process_whose_ledger_is_on_a_volume(render: Render) -> None:
    for values, claim in (({}, None), (FULL, "anchorage-gateway-ledger"),
                          ({"gateway": {"ledger": {"persistence": {"enabled": True, "existingClaim": "mine"}}}}, "mine")):
        rendered = render(values)
        deployment = rendered.one("Deployment", "anchorage-gateway")
        assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
        gateway = container(rendered, "anchorage-gateway")
        params = cli_params("gateway", [a for a in gateway["args"][1:] if not a.startswith("--config")])
        mounts = {m["name"]: m["mountPath"] for m in gateway["volumeMounts"]}
        assert str(params["ledger_dir"]) == mounts["ledger"]
        volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "ledger")
        if claim is None:
            assert "emptyDir" in volume and not rendered.of_kind("PersistentVolumeClaim")
        else:
            assert volume["persistentVolumeClaim"] == {"claimName": claim}
            assert [c["metadata"]["name"] for c in rendered.of_kind("PersistentVolumeClaim")] == \
                ([claim] if claim == "anchorage-gateway-ledger" else [])


def test_default_gateway_serves_the_labelled_mock_and_says_so(render: Render) -> None:
    rendered = render({})
    gateway = container(rendered, "anchorage-gateway")
    params = cli_params("gateway", gateway["args"][1:])
    assert params["mock"] is True and params["host"] == "0.0.0.0" and params["port"] == 8080
    assert "MOCK" in rendered.notes


def test_notes_name_the_gateway_url_and_warn_without_the_token_secret(render: Render) -> None:
    notes = render({"fullnameOverride": "evals"}, release="x", namespace="team-x").notes
    assert "Agents reach the model gateway at http://evals-gateway.team-x.svc:8080/v1." in notes
    assert "WARNING: gateway.tokenSecret.name is empty" in notes
    assert "WARNING: gateway.tokenSecret.name is empty" not in render(FULL).notes


def test_gateway_without_upstream_or_mock_fails_with_the_fix(helm: Any) -> None:
    from charts.conftest import install

    with pytest.raises(helm.InstallError, match=r"gateway\.upstreams"):
        install(helm, {"gateway": {"mock": False}})


# ----- CRDs, NetworkPolicies, dashboards, rules, hooks -----------------------------------------------


def crd_sources(repo_root: Path) -> dict[str, dict[str, Any]]:
    docs = [yaml.safe_load(p.read_text()) for p in sorted((repo_root / "crds").glob("*.yaml"))]
    return {d["metadata"]["name"]: d for d in docs}


def test_chart_crds_are_the_generated_ones(repo_root: Path, chart_dir: Path) -> None:
    shipped = {p.name: p.read_text() for p in (chart_dir / "files" / "crds").glob("*.yaml")}
    source = {p.name: p.read_text() for p in (repo_root / "crds").glob("*.yaml")}
    assert shipped == source, "charts/anchorage/files/crds is stale: cp crds/*.yaml charts/anchorage/files/crds/"
    # kopf's peering CRD: in the chart's crds/ (Helm installs it before the KopfPeering objects)
    shipped = {p.name: p.read_text() for p in (chart_dir / "crds").glob("*")}
    source = {p.name: p.read_text() for p in (repo_root / "crds" / "peering").glob("*.yaml")}
    assert source and shipped == source, "charts/anchorage/crds is stale: cp crds/peering/*.yaml charts/anchorage/crds/"


@pytest.mark.parametrize(("values", "expected", "kept"), [
    ({}, 3, True), ({"crds": {"keep": False}}, 3, False), ({"crds": {"enabled": False}}, 0, False),
], ids=["enabled-kept", "enabled-not-kept", "disabled"])
def test_crds_follow_enabled_and_keep(render: Render, repo_root: Path, values: dict[str, Any], expected: int,
                                      kept: bool) -> None:
    crds = render(values).of_kind("CustomResourceDefinition")
    assert len(crds) == expected
    sources = crd_sources(repo_root)
    for crd in crds:
        assert crd["spec"] == sources[crd["metadata"]["name"]]["spec"]
        policy = (crd["metadata"].get("annotations") or {}).get("helm.sh/resource-policy")
        assert policy == ("keep" if kept else None)


def strip_labels(policy: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in policy["metadata"].items() if k != "labels"}
    return {**policy, "metadata": meta}


def _same_policies(rendered: Rendered) -> set[str]:
    """The names of the operator's trial NetworkPolicies for ``rendered``'s values, asserting the chart renders
    exactly those."""
    operator = sorted((strip_labels(p) for p in network_policies("anchorage-trials", operator_config(rendered))),
                      key=lambda p: p["metadata"]["name"])
    names = {p["metadata"]["name"] for p in operator}
    chart = sorted((strip_labels(p) for p in rendered.of_kind("NetworkPolicy") if p["metadata"]["name"] in names),
                   key=lambda p: p["metadata"]["name"])
    assert chart == operator
    return names


def test_trial_network_policies_are_the_operators_own(render: Render) -> None:
    rendered = render({})
    names = _same_policies(rendered)
    # the store's egress (P3) is the operator's too, so its fallback policies let uploads through without the chart
    assert names == {"anchorage-default-deny", "anchorage-gateway-egress", "anchorage-store-egress"}
    assert {p["metadata"]["name"] for p in rendered.of_kind("NetworkPolicy")} == names


@pytest.mark.parametrize("values", [
    {"trials": {"networkPolicies": {"storeEgress": [{"to": [{"podSelector": {"matchLabels": {"app": "minio"}}}],
                                                     "ports": [{"protocol": "TCP", "port": 9000}]}],
                                    "dnsPodLabels": {"k8s-app": "coredns"}}}},
    {"trials": {"networkPolicies": {"storeEgress": []}}},
    FULL,
], ids=["in-cluster-store", "file-store", "full"])
def test_the_operators_policies_follow_the_values_as_the_charts_do(render: Render, values: dict[str, Any]) -> None:
    """Whatever the values, the operator (which restores a changed policy) builds exactly what the chart renders."""
    rendered = render(values)
    names = _same_policies(rendered)
    store_egress = values["trials"]["networkPolicies"].get("storeEgress")
    assert ("anchorage-store-egress" in names) == (store_egress != [])


def test_only_pods_with_store_access_reach_the_store_and_dns(render: Render) -> None:
    """P3 selects the label the operator adds once the agent ended (and verifier, protocol and replay pods carry):
    a trial pod's agent reaches neither the store nor DNS; the default store rule is public HTTPS only."""
    rendered = render({})
    store = rendered.one("NetworkPolicy", "anchorage-store-egress")
    assert store["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/managed-by": "anchorage",
                                                            "anchorage.dev/store-access": "true"}}
    dns, rule = store["spec"]["egress"]
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert rule["ports"] == [{"protocol": "TCP", "port": 443}]
    (peer,) = rule["to"]
    assert peer["ipBlock"]["cidr"] == "0.0.0.0/0"
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} <= set(peer["ipBlock"]["except"])
    deny = rendered.one("NetworkPolicy", "anchorage-default-deny")
    assert deny["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/managed-by": "anchorage"}}
    gateway = rendered.one("NetworkPolicy", "anchorage-gateway-egress")
    roles = next(e for e in gateway["spec"]["podSelector"]["matchExpressions"] if e["key"] == "anchorage.dev/role")
    assert roles["values"] == ["trial", "protocol"]
    assert [p["port"] for r in gateway["spec"]["egress"] for p in r["ports"]] == ["http"]
    off = render({"trials": {"networkPolicies": {"storeEgress": []}}})
    assert not [p for p in off.of_kind("NetworkPolicy") if p["metadata"]["name"] == "anchorage-store-egress"]


def test_enforcement_is_required_unless_the_values_opt_out(render: Render) -> None:
    assert operator_config(render({})).require_enforcement is True
    off = render({"trials": {"networkPolicies": {"requireEnforcement": False}}})
    assert operator_config(off).require_enforcement is False
    timed = operator_config(render({"trials": {"uploadGracePeriodSeconds": 90, "platformFailures": {
        "unschedulableSeconds": 30, "containerStartSeconds": 20, "nodeLostSeconds": 5}}}))
    assert (timed.upload_grace_sec, timed.unschedulable_after_sec, timed.start_after_sec,
            timed.node_lost_after_sec) == (90, 30, 20, 5)


def test_extra_egress_is_its_own_policy_for_every_pod_role(render: Render) -> None:
    extra = render(FULL).one("NetworkPolicy", "anchorage-trials-extra-egress")
    assert extra["spec"]["egress"] == FULL["trials"]["networkPolicies"]["extraEgress"]
    roles = next(e for e in extra["spec"]["podSelector"]["matchExpressions"] if e["key"] == "anchorage.dev/role")
    assert sorted(roles["values"]) == ["protocol", "trial", "verifier"]


def test_dashboards_ship_as_labelled_configmaps(render: Render, chart_dir: Path) -> None:
    maps = [m for m in render({}).of_kind("ConfigMap") if "-dashboard-" in m["metadata"]["name"]]
    files = {p.name: json.loads(p.read_text()) for p in (chart_dir / "files" / "dashboards").glob("*.json")}
    assert len(files) == 4 and len(maps) == len(files)
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((name, text),) = cm["data"].items()
        assert json.loads(text) == files[name]


def test_prometheus_rule_is_the_unit_tested_rule_file(render: Render, chart_dir: Path, tmp_path: Path) -> None:
    """The rule file with its placeholders filled (tests/charts/test_alert_rules.py unit-tests the result)."""
    rule = render(FULL).one("PrometheusRule", "anchorage")
    source = yaml.safe_load((chart_dir / "files" / "alerts" / "anchorage.rules.yaml").read_text())
    names = [[r["alert"] for r in g["rules"]] for g in rule["spec"]["groups"]]
    monitored = all(FULL["metrics"][m]["enabled"] for m in ("podMonitor", "serviceMonitor"))
    expected = [[r["alert"] for r in g["rules"] if monitored or not r["alert"].endswith("Down")] for g in source["groups"]]
    assert names == [n for n in expected if n]
    assert "${" not in yaml.safe_dump(rule["spec"])
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus"
    rendered_file = tmp_path / "rendered.rules.yaml"
    rendered_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run(["promtool", "check", "rules", str(rendered_file)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_monitors_are_gated_by_values(render: Render) -> None:
    defaults, full = render({}), render(FULL)
    for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
        assert defaults.of_kind(kind) == [] and len(full.of_kind(kind)) == 1, kind
    monitor = full.one("PodMonitor", "anchorage-operator")
    operator = container(full, "anchorage-operator")
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] in ports
    # the operator serves /metrics on the declared port, reachable from outside the pod
    assert f"--metrics-port={ports['metrics']}" in operator["args"] and "--metrics-addr=0.0.0.0" in operator["args"]
    assert not any(a.startswith("--metrics-port") for a in container(defaults, "anchorage-operator")["args"])


def test_helm_test_hook_checks_the_gateway(render: Render) -> None:
    hooks = [p for p in render({}).of_kind("Pod") if (p["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"]
    assert len(hooks) == 1
    script = hooks[0]["spec"]["containers"][0]["args"][0]
    assert "anchorage-gateway.anchorage.svc" in script and ":9090" in script and ":8080" in script
    assert "/healthz" in script and "/metrics" in script and "401" in script
    compile(script, "helm-test", "exec")  # the probe is valid Python
