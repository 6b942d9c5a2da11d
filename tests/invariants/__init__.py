"""Tests of anchorage.invariants: exact numbers, the invariants file, gates, replay checks."""
