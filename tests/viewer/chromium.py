"""Debian's headless Chromium driven by Playwright, for the tests that look at pages in a real browser (the viewer's in
``tests/viewer/``, Inspect's in ``tests/interop/test_inspect_view.py``), and their screenshots, each checked for
content, in ``test-output/viewer/``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("ANCHORAGE_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = Path(os.environ.get("ANCHORAGE_TEST_OUTPUT", Path(__file__).resolve().parents[2] / "test-output")) / "viewer"


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """The browser, launched for the block and closed after it; the test is skipped, with the fix, where Chromium or
    Playwright is missing."""
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"{CHROMIUM} is missing: `make system` installs Debian's chromium (as root)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev dependency (make venv)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield browser
        browser.close()


@contextlib.contextmanager
def new_page(browser: Any, errors: list[str], *, console: bool = False) -> Iterator[Any]:
    """A 1280×900 page in a browser context of its own, closed after the block; the errors its scripts raise are
    added to ``errors`` (``console``: and the errors it logs to its console, but for 404s)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    if console:
        opened.on("console", lambda msg: errors.append(msg.text)
                  if msg.type == "error" and "404" not in msg.text else None)
    yield opened
    context.close()


def screenshot(page: Any, name: str, *, min_inked: float = 0.05) -> Path:
    """Save a full-page screenshot and check it shows something: many distinct colours, and at least
    ``min_inked`` of the page not white (a twentieth for the viewer's own pages)."""
    import matplotlib.image

    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    pixels = matplotlib.image.imread(path)[..., :3]
    inked = (pixels < 0.9).any(axis=-1).mean()
    colours = len({tuple(p) for p in (pixels[::7, ::7].reshape(-1, 3) * 255).astype(int).tolist()})
    assert pixels.shape[0] > 300 and inked > min_inked and colours > 20, (path, inked, colours)
    return path
