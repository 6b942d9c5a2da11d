"""Adding a model-calling agent kind is one module of the package plus generated files (docs/architecture.md, "Add an
agent kind"): done here in a temporary copy of the package, as a contributor would."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from anchorage.commands.dev import render_agent_kinds

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "anchorage"

DUMMY = '''"""A dummy CLI agent (the walkthrough's test)."""

from anchorage.manifests import AgentSpec
from anchorage.tasks import Task
from anchorage.trials.agents.plans import AgentKind, AgentPlan, base_env


def plan(spec: AgentSpec, task: Task, seed: int) -> AgentPlan:
    return AgentPlan("dummy", f"dummy ({spec.model})", ["dummy", "-m", spec.model or "", task.instruction],
                     base_env(spec, task, seed))


KIND = AgentKind("dummy", plan, "a dummy CLI through the gateway", gateway="always", needs_model=True)
'''

CHECK = '''
import json
from pydantic import ValidationError
from anchorage.manifests import TrialSpec
from anchorage.runtime.kube.crds import all_crds
from anchorage.tasks import load_task, resolve_task
from anchorage.trials import plan_agent
spec = TrialSpec.model_validate({"task": "smoke-inventory", "agent": {"kind": "dummy", "model": "m-1"}})
plan = plan_agent(spec.agent, load_task(resolve_task("smoke-inventory")), 0)
try:
    TrialSpec.model_validate({"task": "smoke-inventory", "agent": {"kind": "dummy"}})
    refused = ""
except ValidationError as exc:
    refused = str(exc)
agent = all_crds()["anchorage.dev_trials.yaml"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
    "spec"]["properties"]["agent"]
rules = [r["rule"] for r in agent["x-kubernetes-validations"]]
print(json.dumps({"argv": plan.argv[:3], "gateway": plan.needs_gateway, "refused": refused,
                  "enum": agent["properties"]["kind"]["enum"], "rules": rules}))
'''


def test_the_generated_kinds_are_the_registrys() -> None:
    assert (PACKAGE / "agentkinds.py").read_text() == render_agent_kinds(), "run `anchorage dev crds`"


def test_a_model_calling_kind_is_one_module_and_the_generated_files(tmp_path: Path) -> None:
    copy = tmp_path / "anchorage"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "trials" / "agents" / "dummy.py").write_text(DUMMY)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "ANCHORAGE_TASKS": str(PACKAGE.parents[1] / "tasks")}
    for _ in range(2):  # the second run sees the regenerated kinds in the models (as `anchorage dev crds --check` would)
        subprocess.run([sys.executable, "-c", "import sys; from anchorage.cli import main; "
                        "sys.argv = ['anchorage', 'dev', 'crds', '--out', sys.argv[1]]; main()", str(tmp_path / "crds")],
                       env=env, check=True, capture_output=True, text=True, cwd=tmp_path)
    changed = sorted(str(p.relative_to(copy)) for p in copy.rglob("*.py") if "__pycache__" not in p.parts and (
        not (PACKAGE / p.relative_to(copy)).exists() or not filecmp.cmp(p, PACKAGE / p.relative_to(copy), shallow=False)))
    assert changed == ["agentkinds.py", "trials/agents/dummy.py"]  # the module, and the generated names
    out = subprocess.run([sys.executable, "-c", CHECK], env=env, check=True, capture_output=True, text=True).stdout
    seen = json.loads(out)
    assert seen["argv"] == ["dummy", "-m", "m-1"] and seen["gateway"] is True
    assert "agent.kind 'dummy' needs agent.model" in seen["refused"]
    assert "dummy" in seen["enum"]
    assert any("'dummy'" in rule and "has(self.model)" in rule for rule in seen["rules"])
