"""The S3 server the tests start is the one ``tools/s3`` builds: the version ``anchorage_devcluster.s3server`` looks
for is the ``require`` of ``tools/s3/versitygw/go.mod``, and the built binary says it is that version."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from anchorage_devcluster import s3server

REPO = Path(__file__).resolve().parents[2]


def test_the_pinned_version_is_the_one_looked_for() -> None:
    go_mod = (REPO / "tools" / "s3" / "versitygw" / "go.mod").read_text()
    pinned = re.search(r"^require github\.com/versity/versitygw (v\S+)$", go_mod, re.MULTILINE)
    assert pinned is not None and pinned.group(1) == s3server.S3_VERSION
    assert s3server.binary().parent.name == s3server.S3_VERSION


def test_the_built_binary_reports_that_version() -> None:
    found = s3server.find()
    if isinstance(found, str):
        pytest.skip(found)
    printed = subprocess.run([str(found), "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert f"Version  : {s3server.S3_VERSION}" in printed
