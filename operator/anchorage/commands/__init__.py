"""Command groups of the ``anchorage`` CLI: one module per group, each with ``register(app)``."""

TASK_HELP = "Task directory, or a task name looked up in ./tasks, the repo's tasks/ and $ANCHORAGE_TASKS."

PROFILE_HELP = ("Scoring profile: paper (default: the seed's rules and anchors), strict (+ this project's feasibility "
                "gates), errata (+ its re-derived anchors) or tbmm-report-2026-09 (the published report's "
                "arithmetic); see docs/design-notes.md 'Scoring profiles'.")
