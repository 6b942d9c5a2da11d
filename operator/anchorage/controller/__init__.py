"""The kopf operator: ``kopf run -m anchorage.controller`` (or ``anchorage operator``).

Importing this package registers every handler: ``settings`` (startup: storage prefixes, finalizer, peering, event
level), ``trials`` (Trial → Job → ScoringRun; its steps ``launching``, ``attempts``, ``recording``, ``finishing`` over
``trialstate`` and ``caches``), ``scoring`` (ScoringRun → verifier Job → scores), ``campaigns`` (lazy Trials,
aggregation, suspend/resume) and ``watching`` (the operator's own watch of the Jobs it creates, which calls the Job
handlers of ``attempts``, ``finishing`` and ``scoring``; kopf watches the kinds users create) and ``queueing`` (trials
admitted by Kueue: Queued until admitted, preempted attempts retried; ``kueue`` holds what the operator knows of
Kueue's API). Handlers are thin: they parse the spec into the pydantic models, call the pure builders of
``anchorage.runtime.kube.jobs`` and the shared planning/aggregation code, and write status. ``metering`` (no
handlers) gives model-calling trials their gateway token and reads their usage and cost at the end; ``kube`` holds the
few API calls. ``finalizers`` stops the Jobs and pods of a deleted Trial or ScoringRun (their finalizer across
namespaces); ``unserved`` posts a Warning Event on Trials, ScoringRuns and campaigns created in namespaces no operator
serves.
"""

from anchorage.controller import campaigns, finalizers, queueing, scoring, settings, trials, unserved, watching

__all__ = ["campaigns", "finalizers", "queueing", "scoring", "settings", "trials", "unserved", "watching"]
