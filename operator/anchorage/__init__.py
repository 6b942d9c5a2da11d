"""Anchorage: verifiable evaluation campaigns for AI agents on mathematical-modelling tasks.

One pure core (tasks, scoring, invariants, Lean obligations, campaigns, costs) and two drivers:
the local engine (``anchorage run``) and the Kubernetes operator (``kopf run -m anchorage.controller``).
"""

__version__ = "0.1.0"
