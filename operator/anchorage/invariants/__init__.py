"""Invariants: the six decidable forms, exact evaluation, gates, and named replay checks."""
