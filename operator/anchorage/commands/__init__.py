"""Command groups of the ``anchorage`` CLI: one module per group, each with ``register(app)``."""

TASK_HELP = "Task directory, or a task name looked up in ./tasks, the repo's tasks/ and $ANCHORAGE_TASKS."
