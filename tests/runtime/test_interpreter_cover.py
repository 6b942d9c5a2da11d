"""The sandbox's view of the virtualenv covers every file of an editable install that names the checkout — the
compiled hook too, even when nothing has compiled it yet (uv installs without it; the first import writes it later,
after the view's list was made). Found by tests/hostile/test_host_paths.py when the virtualenv moved to uv."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from anchorage.runtime.local import interpreter


def _site(tmp_path: Path) -> tuple[Path, Path]:
    lib = tmp_path / "lib"
    site = lib / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "__editable__.pkg-0.1.0.pth").write_text("import __editable___pkg_0_1_0_finder\n")
    (site / "__editable___pkg_0_1_0_finder.py").write_text("MAPPING = {'pkg': '/work/checkout/pkg'}\n")
    info = site / "pkg-0.1.0.dist-info"
    info.mkdir()
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///work/checkout", "dir_info": {"editable": True}}))
    (site / "plain.py").write_text("X = 1\n")
    return lib, site


def test_the_hooks_their_compiled_form_and_the_install_records_are_covered_before_any_compile(tmp_path: Path) -> None:
    lib, site = _site(tmp_path)
    compiled = Path(importlib.util.cache_from_source(str(site / "__editable___pkg_0_1_0_finder.py")))
    assert not compiled.exists()
    covered = set(interpreter._covered(lib))
    assert covered == {str(p.relative_to(lib)) for p in (
        site / "__editable__.pkg-0.1.0.pth", site / "__editable___pkg_0_1_0_finder.py", compiled,
        site / "pkg-0.1.0.dist-info" / "direct_url.json")}


def test_a_compiled_hook_that_exists_is_covered_once(tmp_path: Path) -> None:
    lib, site = _site(tmp_path)
    compiled = Path(importlib.util.cache_from_source(str(site / "__editable___pkg_0_1_0_finder.py")))
    compiled.parent.mkdir()
    compiled.write_bytes(b"\x00" * 16)
    covered = interpreter._covered(lib)
    assert covered.count(str(compiled.relative_to(lib))) == 1
