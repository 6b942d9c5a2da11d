"""Tests of the task suite (tasks/, tools/import_reference.py, tools/make_figures.py)."""
