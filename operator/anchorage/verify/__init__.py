"""Verification protocols: adversarial panel, consequence-based utility, ranking metrics, Lean audit."""
