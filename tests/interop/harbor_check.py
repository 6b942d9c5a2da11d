"""Reads a Harbor job folder with Harbor's own pydantic models (the ``harbor`` package, 0.25) and prints what
it read as JSON; run as a separate process by tests/interop/test_harbor.py.

Harbor pins Python >= 3.12; on this project's 3.11 its models load once ``typing`` offers what they import
from it (``override``; ``TypedDict`` as pydantic wants it before 3.12) — both from ``typing_extensions``.
The shims live only in this process, never in the test run's own.
"""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path

import typing_extensions

typing.TypedDict = typing_extensions.TypedDict   # type: ignore[misc]
if not hasattr(typing, "override"):
    typing.override = typing_extensions.override   # type: ignore[attr-defined]

from harbor.models.job.config import JobConfig  # noqa: E402
from harbor.models.job.result import JobResult  # noqa: E402
from harbor.models.trial.config import TrialConfig  # noqa: E402
from harbor.models.trial.result import TrialResult  # noqa: E402


def main(job_dir: Path) -> None:
    config = JobConfig.model_validate_json((job_dir / "config.json").read_text())
    result = JobResult.model_validate_json((job_dir / "result.json").read_text())
    trials = {}
    for folder in sorted(p for p in job_dir.iterdir() if (p / "result.json").is_file()):
        TrialConfig.model_validate_json((folder / "config.json").read_text())
        trial = TrialResult.model_validate_json((folder / "result.json").read_text())
        rewards = trial.verifier_result.rewards if trial.verifier_result else None
        trials[trial.trial_name] = {"task": trial.task_name, "agent": trial.agent_info.name,
                                    "model": trial.agent_info.model_info.name if trial.agent_info.model_info else None,
                                    "reward": (rewards or {}).get("reward"), "exception": (
                                        trial.exception_info.exception_type if trial.exception_info else None),
                                    "cost": trial.agent_result.cost_usd if trial.agent_result else None}
    print(json.dumps({"job_name": config.job_name, "n_attempts": config.n_attempts,
                      "agents": [a.name for a in config.agents], "n_total_trials": result.n_total_trials,
                      "n_completed": result.stats.n_completed_trials, "n_errored": result.stats.n_errored_trials,
                      "evals": sorted(result.stats.evals), "cost_usd": result.stats.cost_usd, "trials": trials}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
