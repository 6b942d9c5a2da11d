"""Tests of the runnable anchors: each reproduction runs and matches its task's committed anchor."""
