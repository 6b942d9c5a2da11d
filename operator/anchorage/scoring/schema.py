"""The JSON Schema of ``tests/score_config.json``, generated from the pydantic models (no hand-kept twin).

:func:`generate` builds it from :class:`anchorage.scoring.scoreconfig.ScoreConfigModel` (so the metric modes,
directions, domains and extension fields come from one place); the checked-in copy
``operator/anchorage/scoring/score_config.schema.json`` is written by ``anchorage dev schemas`` for editors and
other tools, and ``tests/scoring/test_schema.py`` fails when it drifts. ``anchorage tasks validate``
validates configurations with :func:`schema`.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from anchorage.scoring.scoreconfig import ScoreConfigModel

SCHEMA_PATH = Path(__file__).with_name("score_config.schema.json")


def generate() -> dict[str, Any]:
    """The schema of score_config.json (JSON Schema draft 2020-12)."""
    body = ScoreConfigModel.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://anchorage.dev/schemas/score_config.schema.json",
        **body,
        "title": "Anchorage / TB-MathModeling scoring configuration (tests/score_config.json)",
        "description": ("The reference format (v3 legacy and v5 target-minmax configurations) plus Anchorage's "
                        "per-metric extensions domain, exclude_reason, degeneracy_band, unit and range. Descriptive "
                        "top-level fields are allowed; metric entries accept only the fields listed. Generated from "
                        "anchorage.scoring.scoreconfig by `anchorage dev schemas`; see docs/design-notes.md, Scoring."),
    }


def render() -> str:
    """The checked-in file's text."""
    return json.dumps(generate(), indent=2, ensure_ascii=False) + "\n"


def problems(raw: Any) -> list[tuple[str, str]]:
    """(JSON pointer, message) of every way ``raw`` breaks the schema; for an ``anyOf`` (an optional field)
    the message is the most relevant alternative's ("[0] is too short", not "not valid under any")."""
    import jsonschema
    from jsonschema.exceptions import best_match

    validator = jsonschema.Draft202012Validator(schema())
    out: list[tuple[str, str]] = []
    for err in sorted(validator.iter_errors(raw), key=lambda e: list(e.absolute_path)):
        useful = [c for c in err.context or [] if not (c.validator == "type" and c.validator_value == "null")]
        shown = best_match(useful) if useful else err
        out.append(("/" + "/".join(str(p) for p in err.absolute_path), (shown or err).message))
    return out


@cache
def schema() -> dict[str, Any]:
    """The schema used to validate configurations (the generated one: the file is only its copy)."""
    return generate()
