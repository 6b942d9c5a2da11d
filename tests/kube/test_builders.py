"""Every manifest the operator builds is valid Kubernetes and carries the isolation it promises."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from anchorage.errors import InputError
from anchorage.manifests import TrialSpec
from anchorage.runtime import kubejobs
from anchorage.runtime.kubejobs import OperatorConfig
from anchorage.tasks import load_task, resolve_task
from anchorage.trials import plan_agent

K8S = "1.30.0"
TRIAL = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial",
         "metadata": {"name": "t1", "namespace": "evals", "uid": "0000-1111"}}
TASK = load_task(resolve_task("smoke-inventory"))
DEFAULTS = {"cpus": 2, "memory_mb": 8192, "storage_mb": 20480, "gpus": 0, "agent_timeout_sec": 14400}


def _job(agent: dict[str, Any], config: OperatorConfig | None = None, **limits: Any) -> dict[str, Any]:
    spec = TrialSpec.model_validate({"task": "smoke-inventory", "agent": agent, "seed": 2, "limits": limits})
    plan = plan_agent(spec.agent, TASK, spec.seed)
    return kubejobs.trial_job(TRIAL, spec, plan=plan, task_defaults=DEFAULTS,
                              config=config or OperatorConfig(), job_name="t1-a0", campaign="c1")


AGENTS = [{"kind": "oracle"}, {"kind": "command", "command": ["my-agent", "{instruction}"]},
          {"kind": "codex", "model": "gpt-5.5", "reasoningEffort": "xhigh"},
          {"kind": "replay", "artifact": "file:///a.json"}]


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a["kind"])
def test_trial_job_is_valid_and_restricted(agent: dict[str, Any]) -> None:
    job = _job(agent)
    kubernetes_validate.validate(job, K8S, strict=True)
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 14400
    assert spec["ttlSecondsAfterFinished"] > 0
    assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
    for container in pod["containers"] + pod["initContainers"]:
        sc = container["securityContext"]
        assert sc["runAsNonRoot"] and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"] and sc["seccompProfile"]["type"] == "RuntimeDefault"
        if container["name"] != "agent":
            assert container["resources"]["requests"] == container["resources"]["limits"]
    agent_c = pod["containers"][0]
    assert agent_c["resources"]["limits"] == {"cpu": "2000m", "memory": "8192Mi", "ephemeral-storage": "20480Mi"}
    # CPU and memory reserved as limited (cpu_request_ratio 1); the disk requested up to 1 GiB so small nodes place it
    assert agent_c["resources"]["requests"] == {"cpu": "2000m", "memory": "8192Mi", "ephemeral-storage": "1024Mi"}
    data = [m for m in agent_c["volumeMounts"] if m["mountPath"] == "/root/data"]
    assert data and data[0]["readOnly"]
    # only the upload sidecar may hold storage credentials
    assert all("envFrom" not in c or not c["envFrom"] for c in pod["containers"])
    sidecar = next(c for c in pod["initContainers"] if c["name"] == "upload")
    assert sidecar["restartPolicy"] == "Always"
    assert job["metadata"]["labels"][kubejobs.LABEL_CAMPAIGN] == "c1"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "0000-1111"


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a["kind"])
def test_agent_root_is_read_only_and_its_writable_folders_are_size_limited(agent: dict[str, Any]) -> None:
    pod = _job(agent, resultMaxBytes=3 * 1024 * 1024)["spec"]["template"]["spec"]
    agent_c = pod["containers"][0]
    assert agent_c["securityContext"]["readOnlyRootFilesystem"] is True
    assert {e["name"]: e.get("value") for e in agent_c["env"]}["HOME"] == "/root"
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in agent_c["volumeMounts"]}
    limits = {path: volumes[name]["emptyDir"].get("sizeLimit") for path, name in mounts.items()
              if not next(m for m in agent_c["volumeMounts"] if m["mountPath"] == path).get("readOnly")}
    assert limits == {"/root": "1024Mi", "/root/results": "4Mi", "/logs/agent": "257Mi", "/tmp": "1024Mi",
                      kubejobs.RUN_DIR: None}  # results and logs: the quota + 1 MiB, as the local tmpfs
    assert volumes["results"]["emptyDir"]["medium"] == volumes["logs"]["emptyDir"]["medium"] == "Memory"
    quota_args = [a for a in next(c for c in pod["initContainers"] if c["name"] == "upload")["args"] if "=" in a]
    assert f"artifacts={3 * 1024 * 1024}" in quota_args and f"agent={256 * 1024 * 1024}" in quota_args
    sidecar = next(c for c in pod["initContainers"] if c["name"] == "upload")
    sidecar_tmp = next(m["name"] for m in sidecar["volumeMounts"] if m["mountPath"] == "/tmp")
    assert sidecar_tmp not in set(mounts.values())  # the credentialed sidecar shares no scratch with the agent
    assert "runtimeClassName" not in pod


def test_runtime_class_from_the_trial_else_the_operator() -> None:
    config = OperatorConfig(runtime_class_name="gvisor")
    assert _job({"kind": "oracle"}, config)["spec"]["template"]["spec"]["runtimeClassName"] == "gvisor"
    spec = TrialSpec.model_validate({"task": "smoke-inventory", "agent": {"kind": "oracle"}, "runtimeClassName": "kata"})
    job = kubejobs.trial_job(TRIAL, spec, plan=plan_agent(spec.agent, TASK, 0), task_defaults=DEFAULTS,
                             config=config, job_name="t1-a0", campaign=None)
    kubernetes_validate.validate(job, K8S, strict=True)
    assert job["spec"]["template"]["spec"]["runtimeClassName"] == "kata"


def test_a_campaigns_runtime_class_reaches_its_trials() -> None:
    from anchorage.campaigns.planning import plan
    from anchorage.manifests import CampaignSpec

    spec = CampaignSpec.model_validate({"tasks": ["smoke-inventory"], "runtimeClassName": "gvisor",
                                        "entries": [{"name": "o", "agent": {"kind": "oracle"}}]})
    assert {p.spec.runtime_class_name for p in plan("c", spec, ["smoke-inventory"])} == {"gvisor"}


def test_prompt_is_the_positional_argument_of_model_agents() -> None:
    argv = _job(AGENTS[2])["spec"]["template"]["spec"]["containers"][0]["command"]
    assert argv[-2:] == ["--", TASK.instruction] and "gpt-5.5" in argv
    assert _job(AGENTS[1])["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == ["my-agent", TASK.instruction]


def test_gpus_only_when_asked_and_limits_override_the_task() -> None:
    assert "nvidia.com/gpu" not in _job({"kind": "oracle"})["spec"]["template"]["spec"]["containers"][0][
        "resources"]["limits"]
    job = _job({"kind": "oracle"}, gpus=1, cpus=0.5, agentTimeoutSec=60)
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1" and limits["cpu"] == "500m"
    assert job["spec"]["activeDeadlineSeconds"] == 60


def test_storage_secret_goes_to_the_sidecar_only_and_kueue_label() -> None:
    config = OperatorConfig(storage_secret="s3-creds", kueue_queue="evals", trials_namespace="trials")
    job = _job({"kind": "oracle"}, config)
    kubernetes_validate.validate(job, K8S, strict=True)
    pod = job["spec"]["template"]["spec"]
    holders = [c["name"] for c in pod["containers"] + pod["initContainers"] if c.get("envFrom")]
    assert holders == ["upload"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "evals"
    assert job["metadata"]["namespace"] == "trials" and "ownerReferences" not in job["metadata"]


def test_mock_agent_is_refused_with_a_hint() -> None:
    with pytest.raises(InputError, match="local engine only"):
        _job({"kind": "mock"})


def test_verifier_job_has_no_network_and_the_short_deadline() -> None:
    run = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "ScoringRun",
           "metadata": {"name": "t1-score", "namespace": "evals", "uid": "u2"}}
    job = kubejobs.verifier_job(run, task="smoke-inventory", out="c1/t1", config=OperatorConfig(), baseline=None,
                                gates=True, artifacts=[{"uri": "c1/t1/artifacts", "entry": "e", "seed": 0, "out": ""}])
    kubernetes_validate.validate(job, K8S, strict=True)
    assert job["spec"]["activeDeadlineSeconds"] == 180
    assert job["spec"]["template"]["metadata"]["labels"][kubejobs.LABEL_NETWORK] == "none"
    scorer = job["spec"]["template"]["spec"]["containers"][0]
    assert "envFrom" not in scorer and "anchorage.runtime.kubepod" in scorer["command"]


def test_network_policies_deny_egress_but_dns_and_gateway() -> None:
    policies = kubejobs.network_policies("evals", OperatorConfig(gateway_namespace="anchorage"))
    for policy in policies:
        kubernetes_validate.validate(policy, K8S, strict=True)
    deny, allow, verifiers, protocols = policies
    assert protocols["spec"]["egress"][1] == allow["spec"]["egress"][1], "protocol pods reach the gateway only"
    assert deny["spec"]["egress"] == [] and "Egress" in deny["spec"]["policyTypes"]
    ports = allow["spec"]["egress"][0]["ports"]
    assert {p["port"] for p in ports} == {53}
    assert allow["spec"]["egress"][1]["to"][0]["podSelector"]["matchLabels"]
    assert verifiers["spec"]["egress"] == [] and verifiers["spec"]["podSelector"]["matchLabels"][
        kubejobs.LABEL_ROLE] == "verifier"


def test_children_are_owned_and_labelled() -> None:
    campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
                "metadata": {"name": "c1", "namespace": "evals", "uid": "u3"}}
    spec = TrialSpec.model_validate({"task": "smoke-inventory", "agent": {"kind": "oracle"}, "entry": "o"})
    trial = kubejobs.child_trial(campaign, "c1-o-smoke-inventory-s0", spec)
    assert trial["metadata"]["ownerReferences"][0]["kind"] == "VerificationCampaign"
    assert TrialSpec.model_validate(trial["spec"]) == spec
    run = kubejobs.child_scoring_run({**trial, "metadata": {**trial["metadata"], "uid": "u4"}}, "x-score", {})
    assert run["spec"]["trialRef"] == "c1-o-smoke-inventory-s0"
    assert run["metadata"]["labels"][kubejobs.LABEL_CAMPAIGN] == "c1"


@pytest.mark.parametrize("agent", [AGENTS[2], {"kind": "command", "command": ["agent"], "model": "gpt-5.5"},
                                   {"kind": "claude-code", "model": "claude-sonnet-4"}], ids=lambda a: a["kind"])
def test_model_calling_agents_read_their_token_from_the_jobs_secret(agent: dict[str, Any]) -> None:
    config = OperatorConfig(gateway_url="http://gw.team-a.svc:8080/v1")
    job = _job(agent, config)
    kubernetes_validate.validate(job, K8S, strict=True)
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["OPENAI_BASE_URL"]["value"] == "http://gw.team-a.svc:8080/v1"
    assert env["ANTHROPIC_BASE_URL"]["value"] == "http://gw.team-a.svc:8080"  # Anthropic clients add /v1/messages
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert env[name]["valueFrom"] == {"secretKeyRef": {"name": "t1-a0-gateway", "key": "token"}}, name
    # only the agent sees the token: the fetch and upload containers do not
    pod = job["spec"]["template"]["spec"]
    for other in pod["initContainers"]:
        assert not any("valueFrom" in e for e in other.get("env", [])), other["name"]


@pytest.mark.parametrize("agent", [AGENTS[0], AGENTS[1], AGENTS[3]], ids=["oracle", "command-no-model", "replay"])
def test_agents_without_a_model_get_neither_gateway_nor_token(agent: dict[str, Any]) -> None:
    env = {e["name"] for e in _job(agent)["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert not env & {"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
    assert not kubejobs.uses_gateway(TrialSpec.model_validate({"task": "smoke-inventory", "agent": agent}).agent)


def test_gateway_token_secret_is_valid_and_owned_by_the_job() -> None:
    import base64

    job = _job(AGENTS[2])
    created = {**job, "metadata": {**job["metadata"], "uid": "job-uid-1"}}
    secret = kubejobs.gateway_token_secret(created, "atk-abc.def")
    kubernetes_validate.validate(secret, K8S, strict=True)
    assert secret["metadata"]["name"] == "t1-a0-gateway" and secret["metadata"]["namespace"] == "evals"
    assert secret["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "t1-a0",
                                                      "uid": "job-uid-1", "controller": True,
                                                      "blockOwnerDeletion": True}]
    assert base64.b64decode(secret["data"]["token"]).decode() == "atk-abc.def"
    assert secret["immutable"] is True and secret["metadata"]["labels"][kubejobs.LABEL_TRIAL] == "t1"


def test_gateway_admin_url_defaults_to_the_gateway_hosts_admin_port() -> None:
    assert OperatorConfig(gateway_url="http://gw.x.svc:8080/v1/").admin_url() == \
        f"http://gw.x.svc:{kubejobs.GATEWAY_ADMIN_PORT}"
    assert OperatorConfig(gateway_admin_url="http://admin:9000/").admin_url() == "http://admin:9000"


@pytest.mark.parametrize("step", ["panel", "cbu"])
def test_protocol_job_is_valid_holds_its_own_token_and_reaches_only_the_gateway(step: str) -> None:
    config = OperatorConfig(gateway_url="http://gw.team-a.svc:8080/v1")
    job = kubejobs.protocol_job(TRIAL, step=step, task="proof-smoke", settings={"model": "m"}, artifact="a.json",
                                config=config, campaign="c1")
    kubernetes_validate.validate(job, K8S, strict=True)
    assert job["metadata"]["name"] == f"t1-{step}" and job["metadata"]["ownerReferences"][0]["uid"] == "0000-1111"
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels[kubejobs.LABEL_ROLE] == "protocol" and labels[kubejobs.LABEL_STEP] == step
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["OPENAI_API_KEY"]["valueFrom"] == {"secretKeyRef": {"name": f"t1-{step}-gateway", "key": "token"}}
    assert "--step" in container["command"] and step in container["command"]
    assert all("valueFrom" not in e for c in pod["initContainers"] for e in c.get("env", [])), "only the protocol holds it"
    policy = kubejobs.network_policies("evals", config)[-1]
    assert policy["spec"]["podSelector"]["matchLabels"][kubejobs.LABEL_ROLE] == "protocol"


IDENTITY = OperatorConfig(store_service_account="anchorage-store-client", store_role_arn="arn:aws:iam::1:role/store",
                          store_token_audience="sts.amazonaws.com", image_pull_secrets=["team-pull", "mirror-pull"],
                          storage_secret="s3-creds", store_endpoint_url="http://s3.store.svc:7070")
STORE_CONTAINERS = {"upload", "fetch-artifacts"}  # the only containers that read or write the store


def _all_pods(config: OperatorConfig) -> dict[str, dict[str, Any]]:
    run = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "ScoringRun",
           "metadata": {"name": "t1-score", "namespace": "evals", "uid": "u2"}}
    jobs = {f"trial-{a['kind']}": _job(a, config) for a in AGENTS}
    jobs["verifier"] = kubejobs.verifier_job(run, task="smoke-inventory", out="c1/t1", config=config, baseline=None,
                                             gates=True, artifacts=[{"uri": "c1/t1/artifacts", "entry": "e", "seed": 0,
                                                                     "out": ""}])
    jobs["protocol"] = kubejobs.protocol_job(TRIAL, step="panel", task="proof-smoke", settings={"model": "m"},
                                             artifact="a.json", config=config, campaign="c1")
    for job in jobs.values():
        kubernetes_validate.validate(job, K8S, strict=True)
    return {name: job["spec"]["template"] for name, job in jobs.items()}


def test_every_pod_the_operator_creates_pulls_with_the_pull_secrets() -> None:
    for name, template in _all_pods(IDENTITY).items():
        assert template["spec"]["imagePullSecrets"] == [{"name": "team-pull"}, {"name": "mirror-pull"}], name
    assert all("imagePullSecrets" not in t["spec"] for t in _all_pods(OperatorConfig()).values())


def test_only_the_store_containers_get_the_accounts_projected_token_and_the_agent_no_credential() -> None:
    for name, template in _all_pods(IDENTITY).items():
        pod = template["spec"]
        assert pod["serviceAccountName"] == "anchorage-store-client" and pod["automountServiceAccountToken"] is False
        (volume,) = [v for v in pod["volumes"] if v["name"] == kubejobs.STORE_TOKEN_VOLUME]
        assert volume["projected"]["sources"] == [{"serviceAccountToken": {
            "audience": "sts.amazonaws.com", "expirationSeconds": 3600, "path": "token"}}]
        containers = [*pod["initContainers"], *pod["containers"]]
        for c in containers:
            mounted = any(m["name"] == kubejobs.STORE_TOKEN_VOLUME for m in c.get("volumeMounts", []))
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            aws = {k for k in env if k.startswith("AWS_")}
            if c["name"] in STORE_CONTAINERS:
                assert mounted and env["AWS_WEB_IDENTITY_TOKEN_FILE"] == f"{kubejobs.STORE_TOKEN_DIR}/token", (name, c)
                assert env["AWS_ROLE_ARN"] == "arn:aws:iam::1:role/store"
                assert env["AWS_ENDPOINT_URL_S3"] == "http://s3.store.svc:7070" and "AWS_ENDPOINT_URL" not in env
            else:  # the agent, the scorer, the protocol step, fetch-task, check-agent: no token, no key, no secret
                assert not mounted and not aws and "envFrom" not in c, (name, c["name"])
        skipped = set(template["metadata"]["annotations"]["eks.amazonaws.com/skip-containers"].split(","))
        assert skipped == {c["name"] for c in containers} - STORE_CONTAINERS, name
        assert "agent" in skipped or not name.startswith("trial")
        azure = set(template["metadata"]["annotations"]["azure.workload.identity/skip-containers"].split(";"))
        assert azure == skipped


def test_without_an_account_no_pod_names_one_nor_holds_a_token() -> None:
    for name, template in _all_pods(OperatorConfig(storage_secret="s3-creds")).items():
        pod = template["spec"]
        assert "serviceAccountName" not in pod and pod["automountServiceAccountToken"] is False, name
        assert not [v for v in pod["volumes"] if "projected" in v] and "annotations" not in template["metadata"]
