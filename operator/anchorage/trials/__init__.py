"""The trial lifecycle both drivers share — pure: no sandbox, no Kubernetes, no store.

* :mod:`.phases` — ``Phase`` and ``Reason``, the one spelling of the states;
* :mod:`.outcomes` — ``AttemptEnd`` (driver-neutral evidence), ``classify``, ``with_score``,
  ``should_retry``;
* :mod:`.agents` — the agent-kind registry and ``plan_agent`` (argv, env, gateway, binds);
* :mod:`.records` — ``TrialRecord``, the model of ``trial.json`` (and its transcript's account);
* :mod:`.costing` — a trial's cost from the gateway's usage (unknown is not zero);
* :mod:`.limits` — the limits in force (the Trial's, its campaign's, else ``task.toml``'s);
* :mod:`.pipeline` — the ordered post-agent steps (score, gates, Lean, panel, CBU) and which driver
  runs which.

The local engine (``runtime/local``) and the operator (``controller`` + ``runtime/kube``) only turn
their evidence into these types and write what they return. See docs/architecture.md.
"""

from anchorage.trials.agents import AgentPlan, plan_agent
from anchorage.trials.outcomes import AttemptEnd, Outcome, classify, should_retry, with_score
from anchorage.trials.phases import INFRASTRUCTURE_REASONS, TERMINAL, Phase, Reason, is_terminal
from anchorage.trials.records import TrialRecord

__all__ = ["INFRASTRUCTURE_REASONS", "TERMINAL", "AgentPlan", "AttemptEnd", "Outcome", "Phase", "Reason",
           "TrialRecord", "classify", "is_terminal", "plan_agent", "should_retry", "with_score"]
