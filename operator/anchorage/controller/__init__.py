"""The kopf operator: ``kopf run -m anchorage.controller`` (or ``anchorage operator``).

Importing this package registers every handler: ``settings`` (startup: storage prefixes, finalizer,
peering, event level), ``trials`` (Trial → Job → ScoringRun), ``scoring`` (ScoringRun → verifier Job →
scores), ``campaigns`` (lazy Trials, aggregation, suspend/resume) and ``watching`` (the operator's own watch of
the Jobs it creates, which calls the Job handlers of ``trials`` and ``scoring``; kopf watches the kinds users
create) and ``queueing`` (trials admitted by Kueue: Queued until admitted, preempted attempts retried; ``kueue``
holds what the operator knows of Kueue's API). Handlers are thin: they parse the
spec into the pydantic models, call the pure builders of ``anchorage.runtime.kubejobs`` and the shared
planning/aggregation code, and write status. ``gatewaying`` (no handlers) gives model-calling trials their
gateway token and reads their usage and cost at the end; ``kube`` holds the few API calls.
"""

from anchorage.controller import campaigns, queueing, scoring, settings, trials, watching

__all__ = ["campaigns", "queueing", "scoring", "settings", "trials", "watching"]
