"""Golden tests of the generated Lean: one theorem per field for each of the six forms, exact scaled
integers taken from the JSON text (products at the sum of the factors' scales, bounds scaled alike),
Nat where every literal is non-negative and Int otherwise, skipped fields listed as missing evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anchorage.invariants.exact import loads_exact
from anchorage.lean.generation import GeneratedPackage, generate_package

INVARIANTS = """namespace: Golden
invariants:
  - {name: rate, form: range, path: rate, lo: 0, hi: 1}
  - {name: corr, form: range, path: corr, lo: -1, hi: 1}
  - {name: users, form: range, path: users, lo: 1}
  - {name: q95_ge_mean, form: ordering, lhs: mean, rhs: q95}
  - {name: strict, form: ordering, lhs: mean, rhs: q95, op: "<"}
  - {name: head_ratio, form: identity, product: [head, ratio], target: 2, rel_tol: 0.01}
  - {name: area, form: identity, product: [count, w, h], target: area, rel_tol: 0.01, abs_tol: 1}
  - {name: bit, form: finite_domain, path: "bits[*]", values: [0, 1]}
  - {name: bits_len, form: finite_domain, path: bits, measure: length, values: [16, 17]}
  - {name: thickness, form: sign, path: thickness, op: ">"}
  - {name: gain, form: sign, path: gain, op: ">="}
  - {name: ci, form: interval, lo: ci.lo, hi: ci.hi}
  - {name: gone, form: sign, path: absent, op: ">"}
"""

ARTIFACT = ('{"rate": 0.043, "corr": -0.3, "users": 73.52, "mean": 0.12868, "q95": 0.1635, "head": 1.246266,'
            ' "ratio": 1.604793, "count": 3311, "w": 6.0, "h": 6, "area": 119196.0, "bits": [0, 1],'
            ' "thickness": 3.7899, "gain": 0, "ci": {"lo": -2.5, "hi": 1.25}}')

GOLDEN = {
    "range": """/-- range · `rate`: 0 ≤ 0.043 ≤ 1 (decimals scaled by 10^3) -/
theorem rate_range :
    Feasibility.InRange (α := Nat) 0 43 1000 := by decide""",
    "range-int": """/-- range · `corr`: -1 ≤ -0.3 ≤ 1 (decimals scaled by 10^1) -/
theorem corr_range :
    Feasibility.InRange (α := Int) (-10) (-3) 10 := by decide""",
    "range-lower": """/-- range · `users`: 1 ≤ 73.52 (decimals scaled by 10^2) -/
theorem users_range :
    Feasibility.AtLeast (α := Nat) 100 7352 := by decide""",
    "ordering": """/-- ordering · `mean`, `q95`: 0.12868 ≤ 0.1635 (decimals scaled by 10^5) -/
theorem q95_ge_mean_ordering :
    Feasibility.Ordered (α := Nat) 12868 16350 := by decide""",
    "ordering-strict": """theorem strict_ordering :
    Feasibility.StrictlyOrdered (α := Nat) 12868 16350 := by decide""",
    "identity": """/-- identity · `head`, `ratio`: 1.98 ≤ 1.246266 × 1.604793 ≤ 2.02 (2 ± 0.02) (decimals scaled by 10^12) -/
theorem head_ratio_identity :
    Feasibility.WithinBand (α := Nat) 1980000000000 (1246266 * 1604793) 2020000000000 := by decide""",
    "identity-three-factors": """theorem area_identity :
    Feasibility.WithinBand (α := Nat) 118004040 (33110 * 60 * 60) 120387960 := by decide""",
    "finite_domain": """/-- finite_domain · `bits[1]`: 1 ∈ {0, 1} (decimals scaled by 10^0) -/
theorem bit_1_finite_domain :
    ((1 : Nat) = 0) ∨ ((1 : Nat) = 1) := by decide""",
    "finite_domain-length": """theorem bits_len_finite_domain :
    ((2 : Nat) = 16) ∨ ((2 : Nat) = 17) := by decide""",
    "sign": """/-- sign · `thickness`: 0 < 3.7899 (decimals scaled by 10^4) -/
theorem thickness_sign :
    Feasibility.Pos (α := Nat) 37899 := by decide""",
    "sign-nonneg": """theorem gain_sign :
    Feasibility.NonNeg (α := Nat) 0 := by decide""",
    "interval": """/-- interval · `ci.lo`, `ci.hi`: -2.5 ≤ 1.25 (decimals scaled by 10^2) -/
theorem ci_interval :
    Feasibility.WellFormed (α := Int) (-250) 125 := by decide""",
}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> GeneratedPackage:
    task = tmp_path_factory.mktemp("golden-task")
    (task / "tests").mkdir()
    (task / "tests" / "invariants.yaml").write_text(INVARIANTS, encoding="utf-8")
    return generate_package(task, loads_exact(ARTIFACT), tmp_path_factory.mktemp("out"), library=Path("/opt/lean"))


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_golden_theorem(package: GeneratedPackage, case: str) -> None:
    assert GOLDEN[case] in package.module_path.read_text(encoding="utf-8")


def test_module_shape(package: GeneratedPackage) -> None:
    text = package.module_path.read_text(encoding="utf-8")
    assert text.startswith("import Feasibility\n")
    assert "namespace Golden" in text and "end Golden" in text
    assert text.count("\ntheorem ") == 13 and text.count(":= by decide") == 13
    assert "native_decide" not in text and "sorry" not in text
    skipped = text.split("## Skipped obligations: missing evidence, NOT proved", 1)[1]
    assert "`Golden.gone_sign` (absent): absent not present" in skipped
    assert "theorem gone_sign" not in text


def test_package_files(package: GeneratedPackage) -> None:
    root = package.root
    assert (root / "Obligations.lean").read_text(encoding="utf-8") == "import Obligations.Golden\n"
    lakefile = (root / "lakefile.toml").read_text(encoding="utf-8")
    assert 'name = "feasibility"' in lakefile and "[[lean_lib]]" in lakefile and 'name = "Obligations"' in lakefile
    manifest = json.loads((root / "obligations.json").read_text(encoding="utf-8"))
    rows = {row["theorem"]: row for row in manifest["obligations"]}
    assert rows["Golden.head_ratio_identity"]["scale"] == 12
    assert rows["Golden.head_ratio_identity"]["paths"] == ["head", "ratio"]
    assert rows["Golden.bits_len_finite_domain"]["python"] == "failed"
    assert rows["Golden.gone_sign"]["python"] == "missing" and rows["Golden.gone_sign"]["lines"] is None
    lines = rows["Golden.rate_range"]["lines"]
    module_lines = package.module_path.read_text(encoding="utf-8").splitlines()
    assert module_lines[lines[0] - 1].startswith("/-- range · `rate`")
    assert module_lines[lines[1] - 1].endswith(":= by decide")


def test_theorem_lookup_by_line(package: GeneratedPackage) -> None:
    for rendered in package.theorems:
        assert package.theorem_at(rendered.last_line) is rendered
    assert package.theorem_at(1) is None


def test_repository_toolchain_is_copied(tmp_path: Path, repo_root: Path) -> None:
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "invariants.yaml").write_text(INVARIANTS, encoding="utf-8")
    out = generate_package(task, loads_exact(ARTIFACT), tmp_path / "out").root
    assert (out / "lean-toolchain").read_text(encoding="utf-8") == (repo_root / "lean" / "lean-toolchain").read_text(
        encoding="utf-8")
    lakefile = (out / "lakefile.toml").read_text(encoding="utf-8")
    required = (out / lakefile.split('path = "', 1)[1].split('"', 1)[0]).resolve()
    assert required == (repo_root / "lean").resolve()


def test_artifact_text_cannot_break_out_of_lean_comments(tmp_path: Path) -> None:
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "invariants.yaml").write_text(INVARIANTS, encoding="utf-8")
    hostile = loads_exact('{"rate": "/- open", "thickness": "close -/ theorem x : False := sorry", '
                          '"bits": {"/-k": 0, "k-/": 1}}')
    text = generate_package(task, hostile, tmp_path / "out", artifact_label="a/-b-/c").module_path.read_text(
        encoding="utf-8")
    assert "/- open" not in text and "close -/" not in text and "a/-b" not in text
    opened = text.count("/-") - text.count("/-!") - text.count("/--")
    assert opened == 0 and text.count("-/") == text.count("/-")
