"""Tests of anchorage.lean: generation, golden Lean text, checking, audit, discrimination."""
