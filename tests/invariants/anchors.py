"""Shared helpers of the invariants and Lean tests: the 18 benchmark tasks and their anchor artifacts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from anchorage.invariants.exact import load_exact

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks"
REFERENCE_TASKS = Path(os.environ.get("ANCHORAGE_REFERENCE", REPO.parent / "shared" / "reference")) / "tasks"

# The 18 TB-MathModel tasks (SPEC §1); the list is fixed so that a missing task directory is noticed.
SLUGS = (
    "cumcm-2023-a-heliostat-field", "cumcm-2023-b-multibeam-lines", "cumcm-2023-c-vegetable-pricing",
    "cumcm-2024-a-dragon-dance", "cumcm-2024-b-production-decision", "cumcm-2024-c-crop-planting",
    "cumcm-2025-a-smoke-screen", "cumcm-2025-b-sic-thickness", "cumcm-2025-c-nipt",
    "mcm-2023-a-plant-community", "mcm-2023-b-maasai-mara", "mcm-2023-c-wordle",
    "mcm-2024-a-lamprey", "mcm-2024-b-submersible-search", "mcm-2024-c-tennis-momentum",
    "mcm-2025-a-stair-wear", "mcm-2025-b-juneau-tourism", "mcm-2025-c-olympic-medals",
)


def anchor_path(slug: str) -> Path:
    """The task's committed anchor, else the reference data pack's expected result."""
    own = TASKS / slug / "tests" / "expected_result.json"
    return own if own.is_file() else REFERENCE_TASKS / slug / "tests" / "expected_result.json"


def anchor(slug: str) -> Any:
    return load_exact(anchor_path(slug))
