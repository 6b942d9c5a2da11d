"""Twenty-odd malformed manifests through ``anchorage run``: each one clear message with file:line, exit 2.

The classes: size, binary and non-UTF-8 files, huge integers, runaway nesting, alias bombs and
recursive aliases, duplicate keys, syntax, shapes, and huge or odd values — every message quotes at most
a short excerpt of the input, and nothing runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from anchorage import cli

HEAD = "apiVersion: anchorage.dev/v1alpha1\nkind: VerificationCampaign\nmetadata:\n  name: bad\n"
SPEC = "spec:\n  tasks: [smoke-inventory]\n  seeds: 1\n  entries:\n    - {name: o, agent: {kind: oracle}}\n"
GOOD = HEAD + SPEC


def _bomb(levels: int = 12) -> str:
    lines = ["  a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return HEAD + "  annotations:\n" + "\n".join("  " + line for line in lines) + "\n" + SPEC


def _nested(levels: int) -> str:
    return HEAD + "  labels: " + "[" * levels + "]" * levels + "\n" + SPEC


# name → (file bytes, the line the message must name, a phrase it must contain)
CASES: dict[str, tuple[bytes, int | None, str]] = {
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), 3, "binary file"),
    "latin-1": (GOOD.replace("name: bad", "name: bad # caf\u00e9").encode("latin-1"), 4, "not UTF-8"),
    "utf-16": (GOOD.encode("utf-16"), 1, "binary file"),
    "control-char": (GOOD.replace("name: bad", "name: b\x07ad").encode(), 4, "not allowed in YAML"),
    "too-large": ((GOOD + "#" + "x" * (2 * 1024 * 1024) + "\n").encode(), None, "at most"),
    "10mb-list": ((HEAD + SPEC.replace("[smoke-inventory]", "[" + ", ".join(["t"] * 2_000_000) + "]")).encode(),
                  None, "at most"),
    "5000-digit-int": (GOOD.replace("seeds: 1", "seeds: " + "9" * 5000).encode(), 7, "5000 digits"),
    "20000-levels": (_nested(20_000).encode(), 5, "nested more than"),
    "20000-block-levels": ((HEAD + "  labels:\n" + "".join(" " * (2 * i + 4) + "-\n" for i in range(150))
                            + SPEC).encode(), None, "nested more than"),
    "alias-bomb": (_bomb().encode(), None, "aliases are expanded"),
    "recursive-alias": ((HEAD + "  annotations: &loop {self: *loop}\n" + SPEC).encode(), 5, "recursive alias"),
    "duplicate-top-key": ((GOOD + SPEC).encode(), 10, "duplicate key 'spec'"),
    "duplicate-nested-key": (GOOD.replace("seeds: 1", "seeds: 1\n  seeds: 2").encode(), 8, "duplicate key 'seeds'"),
    "duplicate-flow-key": (GOOD.replace("{name: o,", "{name: o, name: p,").encode(), 9, "duplicate key 'name'"),
    "tab-indent": (GOOD.replace("  tasks:", "\ttasks:").encode(), 6, "YAML syntax error"),
    "unclosed-flow": (GOOD.replace("[smoke-inventory]", "[smoke-inventory").encode(), None, "YAML syntax error"),
    "unknown-kind": (GOOD.replace("VerificationCampaign", "Campaign" + "X" * 5000).encode(), 2, "is not one of"),
    "not-a-mapping": (b"- apiVersion: anchorage.dev/v1alpha1\n- kind: Trial\n", 1, "must be a mapping"),
    "empty": (b"# nothing here\n", None, "holds no manifest"),
    "huge-value": (GOOD.replace("seeds: 1", "seeds: \"" + "a" * 100_000 + "\"").encode(), 7, "seeds"),
    "unknown-huge-field": (GOOD.replace("  seeds: 1", "  seedz: " + "b" * 100_000).encode(), 7, "unknown field"),
    "float-overflow": (GOOD.replace("seeds: 1", "seeds: 1\n  parallelism: 1e99999").encode(), 8, "parallelism"),
}


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
            tmp_path: Path) -> Callable[[Path], tuple[int, str]]:
    def run(path: Path) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["anchorage", "run", str(path), "--runs-dir", str(tmp_path / "runs")])
        with pytest.raises(SystemExit) as caught:
            cli.main()
        return int(caught.value.code or 0), capsys.readouterr().err

    return run


@pytest.mark.parametrize("name", list(CASES))
def test_one_clear_message_and_exit_code_2(name: str, run_cli: Callable[[Path], tuple[int, str]],
                                           tmp_path: Path) -> None:
    data, line, phrase = CASES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(data)
    code, err = run_cli(path)
    assert code == 2, err
    assert err.startswith("error: ") and sum(x.startswith("error:") for x in err.splitlines()) == 1, err
    assert "Traceback" not in err, err
    assert phrase in err, err
    where = f"{path}:{line}:" if line is not None else str(path)
    assert where in err, err
    assert len(err) < 1500, f"the message quotes too much ({len(err)} characters)"
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_the_good_manifest_is_accepted(tmp_path: Path) -> None:
    from anchorage.campaigns.documents import load_documents

    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    assert load_documents(path)[0].resource.metadata.name == "bad"


def test_small_aliases_still_work(tmp_path: Path) -> None:
    from anchorage.campaigns.documents import load_documents

    path = tmp_path / "alias.yaml"
    path.write_text(HEAD + "  labels: &l {team: a}\n  annotations: *l\n" + SPEC)
    assert load_documents(path)[0].resource.metadata.annotations == {"team": "a"}
