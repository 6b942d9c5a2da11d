"""The conditions generic tools read on Trials, ScoringRuns and campaigns — pure.

Beside each resource's own conditions (a Trial's ``Ready`` and ``Scored``, a campaign's ``Ready``, ``Degraded`` and
``Suspended``, a ScoringRun's ``Ready``; dashboards and scripts read those), every status the operator writes carries
four more (:func:`lifecycle`), each with the ``observedGeneration`` it was set for:

* ``Complete`` / ``Failed`` — as a Job's: ``Complete=True`` when the object ended well (a trial ``Succeeded``, a
  campaign finished, a run scored), ``Failed=True`` when it ended badly (a trial ``Failed`` — the model's failure —
  or ``InfrastructureFailed``, a refused campaign, a run whose verifier failed). So ``kubectl wait
  --for=condition=Complete`` returns when a trial succeeded and ``--for=condition=Failed`` when it failed; a running
  trial has both ``False``.
* ``Reconciling`` / ``Stalled`` — kstatus's (``sigs.k8s.io/cli-utils/pkg/kstatus``, read by Flux, Argo CD's kstatus
  health and ``kpt``): ``Reconciling=True`` while the object is at work (kstatus: *InProgress*), ``Stalled=True``
  when it ended badly (kstatus: *Failed*), both ``False`` once it ended well (kstatus: *Current*). kstatus also
  compares ``status.observedGeneration`` with ``metadata.generation`` (every status write sets it).

A ``Cancelled`` trial (deleted before its end) has all four ``False``: it did not end well nor badly, it was
stopped (kstatus says *Terminating* for any object being deleted). A suspended campaign is at rest as asked:
``Reconciling=False`` (reason ``Suspended``), so kstatus reads it *Current*, as a suspended Job.

:func:`carry` keeps a condition's ``lastTransitionTime`` while its status stays the same (metav1.Condition's rule).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from anchorage.runtime.kube.status import Condition, now_rfc3339

#: Where an object is, as the four conditions see it.
State = Literal["working", "succeeded", "failed", "cancelled", "suspended"]
LIFECYCLE_TYPES = ("Complete", "Failed", "Reconciling", "Stalled")

_TRIAL_STATES: dict[str, State] = {"Pending": "working", "Queued": "working", "Running": "working",
                                   "Succeeded": "succeeded",
                                   "Failed": "failed", "InfrastructureFailed": "failed", "Cancelled": "cancelled"}
_OTHER_STATES: dict[str, State] = {"Pending": "working", "Running": "working", "Succeeded": "succeeded",
                                   "Failed": "failed", "Suspended": "suspended"}


def condition(type_: str, status: bool, reason: str, message: str = "", generation: int | None = None
              ) -> dict[str, Any]:
    """A metav1.Condition as the API stores it (a dict), set now."""
    return Condition(type=type_, status="True" if status else "False", reason=reason, message=message,
                     observed_generation=generation, last_transition_time=now_rfc3339()
                     ).model_dump(by_alias=True, exclude_none=True)


def state_of(phase: str, *, trial: bool) -> State:
    """The :data:`State` of a Trial's phase (``trial``) or of a ScoringRun's or campaign's phase."""
    return (_TRIAL_STATES if trial else _OTHER_STATES).get(phase, "working")


def lifecycle(state: State, reason: str, message: str = "", generation: int | None = None) -> list[dict[str, Any]]:
    """``Complete``, ``Failed``, ``Reconciling`` and ``Stalled`` for an object in ``state``; ``reason`` (CamelCase,
    e.g. the phase) and ``message`` go on each."""
    flags = {"Complete": state == "succeeded", "Failed": state == "failed", "Reconciling": state == "working",
             "Stalled": state == "failed"}
    return [condition(kind, flags[kind], reason, message, generation) for kind in LIFECYCLE_TYPES]


def carry(previous: Iterable[Mapping[str, Any]] | None, fresh: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``fresh`` with each condition's ``lastTransitionTime`` taken from ``previous`` where its status is unchanged."""
    before = {str(c.get("type")): c for c in previous or ()}
    out = []
    for cond in fresh:
        old = before.get(str(cond["type"]))
        if old is not None and old.get("status") == cond["status"] and old.get("lastTransitionTime"):
            cond = {**cond, "lastTransitionTime": old["lastTransitionTime"]}
        out.append(cond)
    return out
