"""Command groups of the ``anchorage`` CLI: one module per group, each with ``register(app)``."""
