"""Scoring: metric rewards, the panel, O-Eval and Robust BO-Eval, domains, exclusions, gates penalty."""
