"""Consequence-Based Utility (seed 003): score a candidate by how much it helps a solver on neighbours.

For a target problem Q, a candidate solution C and neighbour problems Q'₁…Q'ₘ with verifiable answers,
the utility is

    U(C) = 1/m · Σⱼ  1/R · Σᵣ  verified(solver(Q'ⱼ | exemplar = (Q, C), rollout r))

— each neighbour solved R times (``rollouts``, 64 in the paper; the rollout index is the request's
``seed``) with the candidate given in context, each answer checked against the neighbour's known
answer (:func:`anchorage.verify.numeric.answers_match`), averaged over rollouts and then over
neighbours (every neighbour weighs the same). Each rollout is an isolated call through the gateway.
The candidate is cleaned first, like anything shown to a model. :func:`score_pool` scores a pool and
returns the ``{problem: {candidate: score}}`` map that ``anchorage verify rank --scores`` reads.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from anchorage.errors import InfrastructureError, InputError
from anchorage.verify.cleaning import clean_solution
from anchorage.verify.models import ModelClient
from anchorage.verify.numeric import answers_match, extract_answer
from anchorage.verify.prompts import Problem, PromptSet, load_prompts
from anchorage.verify.settings import CbuSettings


@dataclass(frozen=True)
class Neighbour:
    """A neighbour problem and its verifiable answer."""

    problem: Problem
    answer: str


def utility(target: Problem, candidate: str, neighbours: list[Neighbour], client: ModelClient,
            settings: CbuSettings | None = None, prompts: PromptSet | None = None,
            parallel: int = 8) -> dict[str, Any]:
    """The candidate's utility with per-neighbour accuracies and failed-call counts."""
    if not neighbours:
        raise InputError(f"problem {target.id!r} has no neighbour problems",
                         hint="consequence-based utility needs at least one neighbour with a known answer")
    settings = settings or CbuSettings()
    prompts = prompts or load_prompts(settings.prompts)
    cleaned = clean_solution(candidate)

    def rollout(job: tuple[Neighbour, int]) -> bool | None:
        neighbour, seed = job
        messages = prompts.cbu(target, cleaned, neighbour.problem)
        try:
            reply = client.complete(messages, model=settings.model, seed=seed, temperature=settings.temperature,
                                    run_id=f"{target.id}/{cleaned.digest}/{neighbour.problem.id}/r{seed}").text
        except InfrastructureError:
            return None
        return answers_match(extract_answer(reply), neighbour.answer, settings.rel_tol)

    per_neighbour: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="cbu") as pool:
        for neighbour in neighbours:
            results = list(pool.map(rollout, [(neighbour, r) for r in range(settings.rollouts)]))
            done = [r for r in results if r is not None]
            accuracy = sum(done) / len(done) if done else 0.0
            per_neighbour.append({"neighbour": neighbour.problem.id, "accuracy": accuracy,
                                  "rollouts": len(results), "failed_calls": len(results) - len(done)})
    score = sum(n["accuracy"] for n in per_neighbour) / len(per_neighbour)
    return {"candidate": cleaned.digest, "utility": score, "neighbours": per_neighbour,
            "rollouts": settings.rollouts}


def score_pool(target: Problem, candidates: dict[str, str], neighbours: list[Neighbour], client: ModelClient,
               settings: CbuSettings | None = None, prompts: PromptSet | None = None) -> dict[str, Any]:
    """Utilities of every candidate of one problem: ``{"scores": {id: U}, "details": {id: record}}``."""
    details = {cid: utility(target, text, neighbours, client, settings, prompts) for cid, text in candidates.items()}
    return {"scores": {cid: d["utility"] for cid, d in details.items()}, "details": details}
