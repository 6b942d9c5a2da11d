"""Every manifest the operator builds is valid Kubernetes and carries the isolation it promises."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from anchorage.errors import InputError
from anchorage.manifests import TrialSpec
from anchorage.runtime.kube import jobs
from anchorage.runtime.kube.jobs import OperatorConfig
from anchorage.tasks import load_task, resolve_task
from anchorage.trials import plan_agent
from anchorage.trials.agents import needs_gateway
from anchorage.trials.limits import resolve_limits

K8S = "1.30.0"
TRIAL = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "Trial",
         "metadata": {"name": "t1", "namespace": "evals", "uid": "0000-1111"}}
TASK = load_task(resolve_task("smoke-inventory"))


def _job(agent: dict[str, Any], config: OperatorConfig | None = None, gateway_address: str | None = None,
         **limits: Any) -> dict[str, Any]:
    spec = TrialSpec.model_validate({"task": "smoke-inventory", "agent": agent, "seed": 2, "limits": limits})
    plan = plan_agent(spec.agent, TASK, spec.seed)
    return jobs.trial_job(TRIAL, spec, plan=plan, limits=resolve_limits(TASK, spec.limits),
                          config=config or OperatorConfig(), job_name="t1-a0", campaign="c1",
                          gateway_address=gateway_address)


AGENTS = [{"kind": "oracle"}, {"kind": "command", "command": ["my-agent", "{instruction}"]},
          {"kind": "codex", "model": "gpt-5.5", "reasoningEffort": "xhigh"},
          {"kind": "replay", "artifact": "file:///a.json"}]


@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a["kind"])
def test_trial_job_is_valid_and_restricted(agent: dict[str, Any]) -> None:
    job = _job(agent)
    kubernetes_validate.validate(job, K8S, strict=True)
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    # the agent is timed from its container's start; the Job's deadline is only a backstop beyond it
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 14400 + jobs.platform_allowance(
        OperatorConfig())
    assert job["spec"]["template"]["metadata"]["annotations"][jobs.ANNOTATION_TIMEOUT] == "14400"
    assert pod["terminationGracePeriodSeconds"] == OperatorConfig().upload_grace_sec
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
    assert job["metadata"]["labels"][jobs.LABEL_CAMPAIGN] == "c1"
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
                      jobs.RUN_DIR: None}  # results and logs: the quota + 1 MiB, as the local tmpfs
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
    job = jobs.trial_job(TRIAL, spec, plan=plan_agent(spec.agent, TASK, 0), limits=resolve_limits(TASK, spec.limits),
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
    assert job["spec"]["template"]["metadata"]["annotations"][jobs.ANNOTATION_TIMEOUT] == "60"
    assert job["spec"]["activeDeadlineSeconds"] == 60 + jobs.platform_allowance(OperatorConfig())


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
    job = jobs.verifier_job(run, task="smoke-inventory", out="c1/t1", config=OperatorConfig(), baseline=None,
                            gates=True, artifacts=[{"uri": "c1/t1/artifacts", "entry": "e", "seed": 0, "out": ""}])
    kubernetes_validate.validate(job, K8S, strict=True)
    # the verifier's 180 s run from its scoring container's start (a node busy with thirty pods scheduled it late and
    # the Job's own deadline, counted from its creation, failed 18 of 100 trials as the platform's); the Job's deadline
    # is the backstop
    assert job["spec"]["activeDeadlineSeconds"] == 180 + jobs.platform_allowance(OperatorConfig())
    assert job["spec"]["template"]["metadata"]["labels"][jobs.LABEL_NETWORK] == "none"
    # no agent runs in it: it reaches DNS and the store from the start (policy P3), nothing else
    assert job["spec"]["template"]["metadata"]["labels"][jobs.LABEL_STORE_ACCESS] == "true"
    scorer = job["spec"]["template"]["spec"]["containers"][0]
    assert "envFrom" not in scorer and "anchorage.runtime.kube.pod" in scorer["command"]
    assert scorer["command"][:3] == jobs.timed("score", [], 180)[:3]  # killed 180 s after the container started


STORE_RULE = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "store"}}}],
              "ports": [{"protocol": "TCP", "port": 7070}]}


def test_network_policies_deny_everything_but_the_gateway_and_the_store_with_its_label() -> None:
    policies = jobs.network_policies("evals", OperatorConfig(gateway_namespace="anchorage",
                                                             store_egress=[STORE_RULE]))
    for policy in policies:
        kubernetes_validate.validate(policy, K8S, strict=True)
    deny, gateway, store = policies
    # P1: every pod the operator creates, no ingress, no egress
    assert deny["spec"]["podSelector"] == {"matchLabels": jobs.MANAGED_BY}
    assert deny["spec"]["egress"] == [] and deny["spec"]["ingress"] == []
    assert deny["spec"]["policyTypes"] == ["Ingress", "Egress"]
    # P2: trial and protocol pods reach the gateway pods' model port, nothing else (no DNS)
    roles = next(e for e in gateway["spec"]["podSelector"]["matchExpressions"] if e["key"] == jobs.LABEL_ROLE)
    assert roles["values"] == ["trial", "protocol"]
    (rule,) = gateway["spec"]["egress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": "http"}] and rule["to"][0]["podSelector"]["matchLabels"]
    # P3: only pods labelled store-access reach DNS and the store
    assert store["spec"]["podSelector"]["matchLabels"][jobs.LABEL_STORE_ACCESS] == "true"
    dns, to_store = store["spec"]["egress"]
    assert {p["port"] for p in dns["ports"]} == {53} and to_store == STORE_RULE
    # a file:// store: no store egress at all
    assert [p["metadata"]["name"] for p in jobs.network_policies("evals", OperatorConfig())] == [
        jobs.POLICY_DENY, jobs.POLICY_GATEWAY]


def test_an_agents_pod_has_no_dns_its_gateway_by_host_alias_and_no_store_access() -> None:
    config = OperatorConfig(gateway_url="http://gw.team-a.svc:8080/v1", cluster_dns=["10.96.0.10"])
    job = _job({"kind": "command", "command": ["agent"], "model": "m"}, config, gateway_address="10.96.7.7")
    kubernetes_validate.validate(job, K8S, strict=True)
    template = job["spec"]["template"]
    pod = template["spec"]
    assert jobs.LABEL_STORE_ACCESS not in template["metadata"]["labels"]
    assert pod["dnsPolicy"] == "None" and pod["dnsConfig"]["nameservers"] == [jobs.NO_DNS]
    assert pod["hostAliases"] == [{"ip": "10.96.7.7", "hostnames": ["gw.team-a.svc"]}]
    # the upload sidecar alone resolves names (the store's), through the cluster DNS
    sidecar = next(c for c in pod["initContainers"] if c["name"] == "upload")
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env[jobs.RESOLVER_ENV] == "10.96.0.10" and "svc.cluster.local" in env[jobs.SEARCH_ENV]
    agent = pod["containers"][0]
    assert jobs.RESOLVER_ENV not in {e["name"] for e in agent["env"]}
    # the agent is killed by its own container's timer, so its time starts with its container
    assert "sleep 14400" in agent["command"][2] and "kill -KILL" in agent["command"][2]
    # a replay runs no agent code: store access and DNS from the start, no alias needed
    replay = _job({"kind": "replay", "artifact": "file:///a.json"}, config)["spec"]["template"]
    assert replay["metadata"]["labels"][jobs.LABEL_STORE_ACCESS] == "true"
    assert "dnsPolicy" not in replay["spec"] and "hostAliases" not in replay["spec"]
    # an IP address needs no alias; an agent without a model gets none either
    assert jobs.gateway_host(OperatorConfig(gateway_url="http://10.0.0.5:8080/v1")) is None
    assert "hostAliases" not in _job({"kind": "oracle"}, config)["spec"]["template"]["spec"]


def test_lost_nodes_are_tolerated_only_briefly() -> None:
    pod = _job({"kind": "oracle"}, OperatorConfig(node_lost_after_sec=30))["spec"]["template"]["spec"]
    lost = {t["key"]: t for t in pod["tolerations"]}
    assert {k: (t["effect"], t["tolerationSeconds"]) for k, t in lost.items()} == {
        "node.kubernetes.io/not-ready": ("NoExecute", 30), "node.kubernetes.io/unreachable": ("NoExecute", 30)}
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
    pod = _job({"kind": "oracle"}, OperatorConfig(tolerations=[own]))["spec"]["template"]["spec"]
    assert [t["key"] for t in pod["tolerations"]] == ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"]


def test_children_are_owned_and_labelled() -> None:
    campaign = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "VerificationCampaign",
                "metadata": {"name": "c1", "namespace": "evals", "uid": "u3"}}
    spec = TrialSpec.model_validate({"task": "smoke-inventory", "agent": {"kind": "oracle"}, "entry": "o"})
    trial = jobs.child_trial(campaign, "c1-o-smoke-inventory-s0", spec)
    assert trial["metadata"]["ownerReferences"][0]["kind"] == "VerificationCampaign"
    assert TrialSpec.model_validate(trial["spec"]) == spec
    run = jobs.child_scoring_run({**trial, "metadata": {**trial["metadata"], "uid": "u4"}}, "x-score", {})
    assert run["spec"]["trialRef"] == "c1-o-smoke-inventory-s0"
    assert run["metadata"]["labels"][jobs.LABEL_CAMPAIGN] == "c1"


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
    assert not needs_gateway(TrialSpec.model_validate({"task": "smoke-inventory", "agent": agent}).agent)


def test_gateway_token_secret_is_valid_and_owned_by_the_job() -> None:
    import base64

    job = _job(AGENTS[2])
    created = {**job, "metadata": {**job["metadata"], "uid": "job-uid-1"}}
    secret = jobs.gateway_token_secret(created, "atk-abc.def")
    kubernetes_validate.validate(secret, K8S, strict=True)
    assert secret["metadata"]["name"] == "t1-a0-gateway" and secret["metadata"]["namespace"] == "evals"
    assert secret["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "t1-a0",
                                                      "uid": "job-uid-1", "controller": True,
                                                      "blockOwnerDeletion": True}]
    assert base64.b64decode(secret["data"]["token"]).decode() == "atk-abc.def"
    assert secret["immutable"] is True and secret["metadata"]["labels"][jobs.LABEL_TRIAL] == "t1"


def test_gateway_admin_url_defaults_to_the_gateway_hosts_admin_port() -> None:
    assert OperatorConfig(gateway_url="http://gw.x.svc:8080/v1/").admin_url() == \
        f"http://gw.x.svc:{jobs.GATEWAY_ADMIN_PORT}"
    assert OperatorConfig(gateway_admin_url="http://admin:9000/").admin_url() == "http://admin:9000"


@pytest.mark.parametrize("step", ["panel", "cbu"])
def test_protocol_job_is_valid_holds_its_own_token_and_reaches_only_the_gateway(step: str) -> None:
    config = OperatorConfig(gateway_url="http://gw.team-a.svc:8080/v1")
    job = jobs.protocol_job(TRIAL, step=step, task="proof-smoke", settings={"model": "m"}, artifact="a.json",
                            config=config, campaign="c1")
    kubernetes_validate.validate(job, K8S, strict=True)
    assert job["metadata"]["name"] == f"t1-{step}" and job["metadata"]["ownerReferences"][0]["uid"] == "0000-1111"
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels[jobs.LABEL_ROLE] == "protocol" and labels[jobs.LABEL_STEP] == step
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["OPENAI_API_KEY"]["valueFrom"] == {"secretKeyRef": {"name": f"t1-{step}-gateway", "key": "token"}}
    assert "--step" in container["command"] and step in container["command"]
    assert all("valueFrom" not in e for c in pod["initContainers"] for e in c.get("env", [])), "only the protocol holds it"
    assert job["spec"]["template"]["metadata"]["labels"][jobs.LABEL_STORE_ACCESS] == "true"
    gateway = next(p for p in jobs.network_policies("evals", config) if p["metadata"]["name"] == jobs.POLICY_GATEWAY)
    roles = next(e for e in gateway["spec"]["podSelector"]["matchExpressions"] if e["key"] == jobs.LABEL_ROLE)
    assert "protocol" in roles["values"]


IDENTITY = OperatorConfig(store_service_account="anchorage-store-client", store_role_arn="arn:aws:iam::1:role/store",
                          store_token_audience="sts.amazonaws.com", image_pull_secrets=["team-pull", "mirror-pull"],
                          storage_secret="s3-creds", store_endpoint_url="http://s3.store.svc:7070")
STORE_CONTAINERS = {"upload", "fetch-artifacts"}  # the only containers that read or write the store


def _all_pods(config: OperatorConfig) -> dict[str, dict[str, Any]]:
    run = {"apiVersion": "anchorage.dev/v1alpha1", "kind": "ScoringRun",
           "metadata": {"name": "t1-score", "namespace": "evals", "uid": "u2"}}
    built = {f"trial-{a['kind']}": _job(a, config) for a in AGENTS}
    built["trial-replay-key"] = _job({"kind": "replay", "artifact": "replayed/smoke-inventory_result.json"}, config)
    built["verifier"] = jobs.verifier_job(run, task="smoke-inventory", out="c1/t1", config=config, baseline=None,
                                         gates=True, artifacts=[{"uri": "c1/t1/artifacts", "entry": "e", "seed": 0,
                                                                 "out": ""}])
    built["protocol"] = jobs.protocol_job(TRIAL, step="panel", task="proof-smoke", settings={"model": "m"},
                                         artifact="a.json", config=config, campaign="c1")
    for job in built.values():
        kubernetes_validate.validate(job, K8S, strict=True)
    return {name: job["spec"]["template"] for name, job in built.items()}


def test_every_pod_the_operator_creates_pulls_with_the_pull_secrets() -> None:
    for name, template in _all_pods(IDENTITY).items():
        assert template["spec"]["imagePullSecrets"] == [{"name": "team-pull"}, {"name": "mirror-pull"}], name
    assert all("imagePullSecrets" not in t["spec"] for t in _all_pods(OperatorConfig()).values())


def test_only_the_store_containers_get_the_accounts_projected_token_and_the_agent_no_credential() -> None:
    for name, template in _all_pods(IDENTITY).items():
        pod = template["spec"]
        assert pod["serviceAccountName"] == "anchorage-store-client" and pod["automountServiceAccountToken"] is False
        (volume,) = [v for v in pod["volumes"] if v["name"] == jobs.STORE_TOKEN_VOLUME]
        assert volume["projected"]["sources"] == [{"serviceAccountToken": {
            "audience": "sts.amazonaws.com", "expirationSeconds": 3600, "path": "token"}}]
        containers = [*pod["initContainers"], *pod["containers"]]
        # a replay of a store key: the platform's fetch-task reads the store (no agent code runs in that pod)
        store = STORE_CONTAINERS | ({"fetch-task"} if name == "trial-replay-key" else set())
        for c in containers:
            mounted = any(m["name"] == jobs.STORE_TOKEN_VOLUME for m in c.get("volumeMounts", []))
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            aws = {k for k in env if k.startswith("AWS_")}
            if c["name"] in store:
                assert mounted and env["AWS_WEB_IDENTITY_TOKEN_FILE"] == f"{jobs.STORE_TOKEN_DIR}/token", (name, c)
                assert env["AWS_ROLE_ARN"] == "arn:aws:iam::1:role/store"
                assert env["AWS_ENDPOINT_URL_S3"] == "http://s3.store.svc:7070" and "AWS_ENDPOINT_URL" not in env
            else:  # the agent, the scorer, the protocol step, fetch-task, check-agent: no token, no key, no secret
                assert not mounted and not aws and "envFrom" not in c, (name, c["name"])
        skipped = set(template["metadata"]["annotations"]["eks.amazonaws.com/skip-containers"].split(","))
        assert skipped == {c["name"] for c in containers} - store, name
        assert "agent" in skipped or not name.startswith("trial")
        azure = set(template["metadata"]["annotations"]["azure.workload.identity/skip-containers"].split(";"))
        assert azure == skipped


def test_without_an_account_no_pod_names_one_nor_holds_a_token() -> None:
    for name, template in _all_pods(OperatorConfig(storage_secret="s3-creds")).items():
        pod = template["spec"]
        assert "serviceAccountName" not in pod and pod["automountServiceAccountToken"] is False, name
        skipped = {"eks.amazonaws.com/skip-containers", "azure.workload.identity/skip-containers"}
        assert not [v for v in pod["volumes"] if "projected" in v]
        assert not skipped & set(template["metadata"].get("annotations") or {}), name


def test_a_replay_of_a_store_key_is_fetched_by_the_platform_with_the_stores_credentials() -> None:
    """The agent names a store key (the operator has no file of it): the fetch-task init container, platform code,
    reads it from the store; no other trial's fetch-task holds the store's credentials, and the agent never does."""
    config = OperatorConfig(store_uri="s3://runs", storage_secret="store-creds")

    def containers(agent: dict[str, Any]) -> dict[str, Any]:
        pod = _job(agent, config)["spec"]["template"]["spec"]
        return {c["name"]: c for c in pod["initContainers"] + pod["containers"]}

    replay = containers({"kind": "replay", "artifact": "replayed/smoke-inventory_result.json"})
    fetch = replay["fetch-task"]
    assert {e["name"]: e.get("value") for e in fetch["env"]}["ANCHORAGE_STORE"] == "s3://runs"
    assert fetch["envFrom"] == [{"secretRef": {"name": "store-creds"}}]
    assert "envFrom" not in replay["agent"]
    for other in ({"kind": "oracle"}, {"kind": "command", "command": ["agent"]},
                  {"kind": "replay", "artifact": "file:///a.json"}):  # a file of the image: no store needed
        fetched = containers(other)["fetch-task"]
        assert "envFrom" not in fetched and "ANCHORAGE_STORE" not in {e["name"] for e in fetched["env"]}


def test_an_agent_starts_only_after_its_pods_policies_block_its_egress() -> None:
    """With ``require_enforcement`` the last init container (after the upload sidecar, before the agent) is
    ``await-policy`` in the operator's image; a replay (no agent code) and an operator that does not require
    enforcement have none."""
    for agent in AGENTS[:3]:
        pod = _job(agent)["spec"]["template"]["spec"]
        last = pod["initContainers"][-1]
        assert last["name"] == jobs.POLICY_CONTAINER and last["args"][0] == "await-policy", agent
        assert last["image"] == OperatorConfig().operator_image and "env" not in last and "envFrom" not in last
        assert [c["name"] for c in pod["initContainers"]].index("upload") < len(pod["initContainers"]) - 1
    names = [c["name"] for c in _job(AGENTS[3])["spec"]["template"]["spec"]["initContainers"]]
    assert jobs.POLICY_CONTAINER not in names  # a replay
    unrequired = _job(AGENTS[0], OperatorConfig(require_enforcement=False))["spec"]["template"]["spec"]
    assert jobs.POLICY_CONTAINER not in [c["name"] for c in unrequired["initContainers"]]
