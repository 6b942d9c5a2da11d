"""Figures: every image an instruction links and every figure a source manifest lists exists, was made by
tools/make_figures.py from the official PDF as recorded, and the script reproduces it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image, ImageChops, ImageStat

from .helpers import ALL_SLUGS, REPO, TASKS, read_json

LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")
TABLE = yaml.safe_load((REPO / "tools" / "figures.yaml").read_text(encoding="utf-8"))


def linked_figures(slug: str) -> list[str]:
    return LINK.findall((TASKS / slug / "instruction.md").read_text(encoding="utf-8"))


def test_21_figures_over_the_tasks_that_have_them() -> None:
    linked = {slug: linked_figures(slug) for slug in ALL_SLUGS}
    assert sum(len(v) for v in linked.values()) == 21
    assert {s for s, v in linked.items() if v} == set(TABLE["tasks"])
    for slug, names in linked.items():
        assert sorted(names) == sorted(f"{n}.png" for n in TABLE["tasks"].get(slug, {}).get("figures", {}))


@pytest.mark.parametrize("slug", ALL_SLUGS)
def test_instruction_links_and_container_paths_resolve(slug: str) -> None:
    for name in linked_figures(slug):
        beside, inside = TASKS / slug / name, TASKS / slug / "environment" / "data" / "figures" / name
        assert beside.read_bytes() == inside.read_bytes()
        with Image.open(inside) as image:
            assert image.format == "PNG" and image.width > 100 and image.height > 50
        assert f"/root/data/figures/{name}" in (TASKS / slug / "instruction.md").read_text(encoding="utf-8")
    for path in read_json(TASKS / slug / "environment" / "data" / "source_manifest.json").get("figures", []):
        assert (TASKS / slug / "environment" / "data" / path.removeprefix("/root/data/")).is_file(), path


@pytest.mark.parametrize("slug", sorted(TABLE["tasks"]))
def test_each_figure_is_recorded(slug: str) -> None:
    record = (TASKS / slug / "environment" / "data" / "figures" / "FIGURES.md").read_text(encoding="utf-8")
    assert "pdftoppm -r 150" in record and TABLE["tasks"][slug]["pdf"] in record
    for name in TABLE["tasks"][slug]["figures"]:
        assert f"`{name}.png`" in record


def test_make_figures_reproduces_a_committed_figure(tmp_path: Path) -> None:
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm (poppler-utils) is not installed: run `make system`")
    slug = "cumcm-2024-b-production-decision"
    pdf = TABLE["tasks"][slug]["pdf"]
    target = tmp_path / slug / "environment" / "data" / pdf
    target.parent.mkdir(parents=True)
    shutil.copyfile(TASKS / slug / "environment" / "data" / pdf, target)
    subprocess.run([sys.executable, str(REPO / "tools" / "make_figures.py"), "--tasks", str(tmp_path), "--only", slug],
                   check=True, capture_output=True, timeout=60)
    made = tmp_path / slug / "environment" / "data" / "figures" / "fig_1.png"
    with Image.open(made) as new, Image.open(TASKS / slug / "environment" / "data" / "figures" / "fig_1.png") as old:
        assert new.size == old.size
        diff = ImageChops.difference(new.convert("L"), old.convert("L"))
        assert ImageStat.Stat(diff).mean[0] < 2.0   # identical with the same poppler; tolerant of another version
    assert (tmp_path / slug / "fig_1.png").read_bytes() == made.read_bytes()
