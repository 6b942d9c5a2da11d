"""``tools/bytecode.py``: a clean clone's virtualenv gets the bytecode of the same lock from the cache instead of
compiling it again, and never keeps a cached ``.pyc`` that does not match its source."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
import bytecode  # noqa: E402  (tools/ is not a package)

TAG = sys.implementation.cache_tag


def _site(root: Path, packages: Path | None = None) -> Path:
    """A site-packages folder with one package; its sources hard-linked from ``packages`` (as uv links them from
    its cache: the same files, the same modification times) or written anew."""
    site = root / "site-packages"
    (site / "pkg").mkdir(parents=True)
    for name in ("__init__.py", "mod.py"):
        if packages is not None:
            os.link(packages / "pkg" / name, site / "pkg" / name)
        else:
            (site / "pkg" / name).write_text(f"VALUE = {name!r}\n")
    return site


def _pyc(site: Path) -> Path:
    return site / "pkg" / "__pycache__" / f"mod.{TAG}.pyc"


def _valid(site: Path) -> bool:
    """Whether the .pyc's header matches its source's modification time and size (what the import system checks)."""
    source = site / "pkg" / "mod.py"
    header = _pyc(site).read_bytes()[:16]
    stat = source.stat()
    return (header[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(header[8:12], "little") == int(stat.st_mtime)
            and int.from_bytes(header[12:16], "little") == stat.st_size)


def test_the_first_run_compiles_and_keeps_the_bytecode_the_next_reuses_it(tmp_path: Path) -> None:
    first = _site(tmp_path / "one")
    cache = tmp_path / "cache" / "lock-1"
    assert bytecode.main([str(first), str(cache)]) == 0
    kept = tmp_path / "cache" / f"lock-1-{TAG}"
    assert _valid(first) and (kept / "pkg" / "__pycache__" / f"mod.{TAG}.pyc").is_file()

    second = _site(tmp_path / "two", packages=first)
    assert not _pyc(second).exists()
    assert bytecode.main([str(second), str(cache)]) == 0
    assert _valid(second)
    assert _pyc(second).stat().st_ino == (kept / "pkg" / "__pycache__" / f"mod.{TAG}.pyc").stat().st_ino  # linked


def test_a_cached_pyc_of_another_source_is_compiled_again_not_kept(tmp_path: Path) -> None:
    first = _site(tmp_path / "one")
    cache = tmp_path / "cache" / "lock-1"
    bytecode.main([str(first), str(cache)])
    other = _site(tmp_path / "two")  # written anew: another modification time and size
    (other / "pkg" / "mod.py").write_text("VALUE = 'changed, longer than before'\n")
    os.utime(other / "pkg" / "mod.py", (1_000_000_000, 1_000_000_000))
    bytecode.main([str(other), str(cache)])
    assert _valid(other)
    kept = tmp_path / "cache" / f"lock-1-{TAG}" / "pkg" / "__pycache__" / f"mod.{TAG}.pyc"
    assert _pyc(other).stat().st_ino != kept.stat().st_ino


def test_only_the_three_most_recent_locks_are_kept(tmp_path: Path) -> None:
    site = _site(tmp_path / "one")
    for n in range(5):
        bytecode.main([str(site), str(tmp_path / "cache" / f"lock-{n}")])
        os.utime(tmp_path / "cache" / f"lock-{n}-{TAG}", (1_500_000_000 + n, 1_500_000_000 + n))
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [f"lock-{n}-{TAG}" for n in (2, 3, 4)]


def test_a_missing_site_packages_is_one_clear_error(tmp_path: Path) -> None:
    assert bytecode.main([str(tmp_path / "nowhere"), str(tmp_path / "cache")]) == 2
    assert bytecode.main([]) == 2
