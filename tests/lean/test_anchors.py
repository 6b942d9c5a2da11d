"""Every obligation of every anchor artifact is true, and the total in lean/README.md is the real one."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from anchorage.invariants.compiler import obligations
from anchorage.invariants.expr import Cmp, Mul
from anchorage.invariants.spec import load_invariants
from anchorage.lean.obligations import summarize
from invariants.anchors import SLUGS, TASKS, anchor, anchor_path


def _anchored() -> list[str]:
    return [slug for slug in SLUGS if anchor_path(slug).is_file()]


@pytest.mark.parametrize("slug", SLUGS)
def test_every_obligation_of_the_anchor_is_true(slug: str) -> None:
    if not anchor_path(slug).is_file():
        pytest.skip(f"no anchor for {slug}")
    spec = load_invariants(TASKS / slug)
    assert spec is not None
    obs = obligations(spec, anchor(slug))
    assert obs
    false = [f"{ob.name}: {ob.claim}" for ob in obs if not ob.skipped and not ob.holds()]
    assert not false, false
    assert len({ob.name for ob in obs}) == len(obs), "theorem names must be unique"


def test_readme_total_matches_the_count(repo_root: Path) -> None:
    slugs = _anchored()
    if len(slugs) != len(SLUGS):
        pytest.skip("not every anchor is present; the README counts all 18")
    counts = Counter({slug: len(obligations(load_invariants(TASKS / slug), anchor(slug))) for slug in slugs})  # type: ignore[arg-type]
    total = sum(counts.values())
    readme = (repo_root / "lean" / "README.md").read_text(encoding="utf-8")
    assert "| **total** | | **" in readme and f"**{total}**" in readme, f"README total should be {total}"
    for slug, count in counts.items():
        row = re.search(rf"^\| {re.escape(slug)} \| \w+ \| \d+ \| (\d+) \|", readme, re.MULTILINE)
        assert row and int(row.group(1)) == count, f"{slug}: README row should say {count}"


def test_summarize_hook_counts(tmp_path: Path) -> None:
    slug = "cumcm-2024-a-dragon-dance"
    if not anchor_path(slug).is_file():
        pytest.skip("dragon anchor missing")
    summary = summarize(TASKS / slug, anchor(slug))
    assert summary["checker"] == "python"
    assert summary["total"] == summary["proved_by_python"] > 0 and summary["failed"] == summary["missing"] == 0
    empty = summarize(TASKS / slug, {})
    assert empty["missing"] == empty["total"] > 0 and empty["proved_by_python"] == 0
    assert summarize(tmp_path, {})["total"] == 0


def test_dragon_identity_on_the_anchor_is_scaled_like_its_product() -> None:
    slug = "cumcm-2024-a-dragon-dance"
    if not anchor_path(slug).is_file():
        pytest.skip("dragon anchor missing")
    spec = load_invariants(TASKS / slug)
    assert spec is not None
    (ob,) = [o for o in obligations(spec, anchor(slug)) if o.name == "q5_head_ratio_identity"]
    assert ob.scale == 12 and ob.lean_type == "Nat" and ob.holds()
    assert ob.prop is not None and not isinstance(ob.prop, Cmp)
    lo, product, hi = ob.prop.args  # type: ignore[union-attr]
    assert (lo, hi) == (1_980_000_000_000, 2_020_000_000_000)
    assert isinstance(product, Mul) and product.factors == (1_246_266, 1_604_793)
