"""Regenerate the figures the task instructions reference (``fig_N.png``) from the official problem PDFs.

Run by hand after ``tools/import_reference.py`` (``.venv/bin/python tools/make_figures.py [--only SLUG]``);
the task-suite tests check the result. Driven by the declarative table ``tools/figures.yaml`` (task, figure,
page, crop box). For each figure: poppler renders the page (``pdftoppm -r DPI -f N -l N -png``), Pillow
crops the box (PDF points, origin top-left) and trims the white margin around the drawing, and the PNG is
written to ``environment/data/figures/fig_N.png`` (what the agent sees at ``/root/data/figures``) and beside
``instruction.md`` (the instruction links figures by relative name). ``environment/data/figures/FIGURES.md``
records how each one was made. Output is deterministic for a given poppler version.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from PIL import Image, ImageChops

REPO = Path(__file__).resolve().parents[1]
TABLE = Path(__file__).with_name("figures.yaml")
POINTS_PER_INCH = 72.0
MARGIN_PX = 8
WHITE_THRESHOLD = 245   # pixels lighter than this count as background when trimming


@dataclass(frozen=True)
class Figure:
    """One row of the table: which page of which PDF, and the box to cut."""

    slug: str
    name: str
    pdf: str
    page: int
    box: tuple[float, float, float, float]


def load_table(path: Path = TABLE) -> tuple[int, list[Figure]]:
    raw: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    figures = []
    for slug, task in raw["tasks"].items():
        for name, spec in task["figures"].items():
            x0, y0, x1, y1 = (float(v) for v in spec["box"])
            if not (x0 < x1 and y0 < y1):
                raise SystemExit(f"{TABLE.name}: {slug}/{name}: box {spec['box']} is empty (need x0 < x1, y0 < y1)")
            figures.append(Figure(slug, name, str(task["pdf"]), int(spec["page"]), (x0, y0, x1, y1)))
    return int(raw.get("dpi", 150)), figures


def render_page(pdf: Path, page: int, dpi: int, workdir: Path) -> Image.Image:
    """Render one page with poppler's pdftoppm; raise SystemExit with the fix when poppler is missing."""
    pdftoppm = shutil.which("pdftoppm")
    if pdftoppm is None:
        raise SystemExit("pdftoppm not found: install poppler-utils (make system)")
    prefix = workdir / f"page{page}"
    subprocess.run([pdftoppm, "-r", str(dpi), "-f", str(page), "-l", str(page), "-png", "-singlefile", str(pdf),
                    str(prefix)], check=True)
    with Image.open(prefix.with_suffix(".png")) as image:
        return image.convert("RGB")


def trim(image: Image.Image) -> Image.Image:
    """Cut the near-white margin around the content, keeping MARGIN_PX of white on each side."""
    gray = image.convert("L").point(lambda v: 255 if v >= WHITE_THRESHOLD else 0)
    bbox = ImageChops.invert(gray).getbbox()
    if bbox is None:
        raise SystemExit("crop box holds only white: check the page number and box in tools/figures.yaml")
    x0, y0, x1, y1 = bbox
    return image.crop((max(0, x0 - MARGIN_PX), max(0, y0 - MARGIN_PX),
                       min(image.width, x1 + MARGIN_PX), min(image.height, y1 + MARGIN_PX)))


def cut(page: Image.Image, box: tuple[float, float, float, float], dpi: int) -> Image.Image:
    scale = dpi / POINTS_PER_INCH
    x0, y0, x1, y1 = (round(v * scale) for v in box)
    return trim(page.crop((x0, y0, x1, y1)))


def make_task_figures(slug: str, figures: list[Figure], dpi: int, tasks_dir: Path) -> list[str]:
    """Write one task's figures and its FIGURES.md; return the record lines."""
    data = tasks_dir / slug / "environment" / "data"
    out_dir = data / "figures"
    out_dir.mkdir(parents=True, exist_ok=True)
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        pages: dict[int, Image.Image] = {}
        for fig in figures:
            pdf = data / fig.pdf
            if not pdf.is_file():
                raise SystemExit(f"{slug}: {fig.pdf} not found under environment/data (run tools/import_reference.py)")
            if fig.page not in pages:
                pages[fig.page] = render_page(pdf, fig.page, dpi, Path(tmp))
            image = cut(pages[fig.page], fig.box, dpi)
            target = out_dir / f"{fig.name}.png"
            image.save(target, format="PNG", optimize=True)
            shutil.copyfile(target, tasks_dir / slug / f"{fig.name}.png")
            digest = hashlib.sha256(target.read_bytes()).hexdigest()[:16]
            records.append(f"| `{fig.name}.png` | {fig.page} | {list(fig.box)} | {image.width}×{image.height} | `{digest}` |")
        pdf_sha = hashlib.sha256((data / figures[0].pdf).read_bytes()).hexdigest()
    write_record(out_dir / "FIGURES.md", slug, figures[0].pdf, pdf_sha, dpi, records)
    return records


def write_record(path: Path, slug: str, pdf: str, pdf_sha: str, dpi: int, rows: list[str]) -> None:
    text = f"""# Figures of {slug}

Regenerated by `tools/make_figures.py` from the official problem PDF (the reference pack lacks the PNGs;
see its PROVENANCE.md, "Missing"), driven by `tools/figures.yaml`:

* source: `/root/data/{pdf}` (sha256 `{pdf_sha}`)
* render: `pdftoppm -r {dpi} -f PAGE -l PAGE -png` (poppler)
* crop: the box below (PDF points, origin top-left) scaled by {dpi}/72, then the white margin trimmed
  (pixels ≥ {WHITE_THRESHOLD} are background; {MARGIN_PX} px kept), saved with Pillow; a copy sits beside
  `instruction.md`, which links the figures by relative name
* checked by eye: each crop holds the whole drawing and its caption and nothing of the surrounding text

| file | page | box [x0, y0, x1, y1] (pt) | size (px) | sha256 (first 16) |
|---|---:|---|---|---|
""" + "\n".join(rows) + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, default=REPO / "tasks", help="the task directories (default: tasks/)")
    parser.add_argument("--only", action="append", default=[], help="regenerate only this task's figures (repeatable)")
    args = parser.parse_args(argv)
    dpi, figures = load_table()
    slugs = sorted({f.slug for f in figures})
    unknown = set(args.only) - set(slugs)
    if unknown:
        print(f"error: no figures declared for {sorted(unknown)} in {TABLE}", file=sys.stderr)
        return 2
    for slug in args.only or slugs:
        rows = make_task_figures(slug, [f for f in figures if f.slug == slug], dpi, args.tasks)
        print(f"{slug}: {len(rows)} figure(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
