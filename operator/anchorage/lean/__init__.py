"""The Lean 4 obligation layer: generation, the Lean runner, trust audit, discrimination suite."""
