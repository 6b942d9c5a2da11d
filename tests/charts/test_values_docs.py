"""The chart's value documentation: every property of values.schema.json has a description, and the schema's
descriptions and the README's values table are what tools/chart_values.py makes of values.yaml's comments."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import chart_values


def test_every_schema_property_has_a_description(chart_dir: Path) -> None:
    schema = json.loads((chart_dir / "values.schema.json").read_text())
    assert chart_values.undescribed(schema) == []


def test_schema_descriptions_and_readme_table_are_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert chart_values.main(["--check"]) == 0, capsys.readouterr().err


def test_a_changed_comment_is_noticed(chart_dir: Path, tmp_path: Path) -> None:
    """The check is not vacuous: a comment edited in values.yaml changes both generated files."""
    copy = tmp_path / "anchorage"
    shutil.copytree(chart_dir, copy)
    values = (copy / "values.yaml").read_text()
    (copy / "values.yaml").write_text(values.replace("# -- Image pull policy.", "# -- How images are pulled."))
    generated = chart_values.generate(copy)
    assert "How images are pulled." in generated[copy / "README.md"]
    schema = json.loads(generated[copy / "values.schema.json"])
    assert schema["properties"]["image"]["properties"]["pullPolicy"]["description"] == "How images are pulled."


def test_every_value_has_a_row(chart_dir: Path) -> None:
    readme = (chart_dir / "README.md").read_text()
    described = chart_values.comments((chart_dir / "values.yaml").read_text())
    leaves = [p for p in described if not any(o.startswith(p + ".") for o in described)]
    assert leaves and all(f"| `{p}` |" in readme for p in leaves)
    assert "trials.priorityClassName" in leaves and "prometheusRule.thresholds.spendUSDPerDay" in leaves
