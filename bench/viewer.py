"""The viewer and the report on a campaign of 10,000 trials: the campaign page's server time, report.html's size.

Writes a finished campaign folder directly (``tests/report/bigrun.py``: two entries × four tasks × 1,250 seeds,
a score record and a log per trial; no agent runs), then, in one run, side by side:

* **floor** — reading the campaign's 10,000 records (confined reads, validation) and its board: what any page of
  the campaign pays before it writes a byte;
* **page, uncached** — ``GET /campaigns/big/`` from the viewer (aiohttp on 127.0.0.1) with the campaign cache off
  (``--refresh 0``): every request reads the campaign again, as the first visit does;
* **page, cached** — the same page within the cache's lifetime (``--refresh``: 5 s by default);
* **report** — ``anchorage report``'s rebuild of the folder (plots included) and report.html's size;
* with ``--before TREE`` (another checkout, e.g. main before this change): the campaign page built in a process
  of its own by that tree's code and by this one's, side by side (CPU per build, the page's size), and that
  tree's report rebuild (its size).

Per request: the wall time seen by the client on loopback and the CPU the process spent (the client waits idle, so
that CPU is the server's). Figures: the median and the best of ``--rounds`` requests. Run it under the bench lock:

    flock /work/coord/bench.lock .venv/bin/python bench/viewer.py --rounds 5 [--before /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from tests.report.bigrun import write_run  # noqa: E402

from anchorage.gateway.running import BackgroundServer  # noqa: E402
from anchorage.report.runs import LocalRuns  # noqa: E402
from anchorage.report.writing import rebuild  # noqa: E402
from anchorage.viewer.app import make_app  # noqa: E402


def measure(work: Callable[[], object], rounds: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus


def line(label: str, walls: list[float], cpus: list[float], extra: str = "") -> str:
    return (f"{label:<22} wall median {statistics.median(walls):6.3f} s (best {min(walls):6.3f})   "
            f"CPU median {statistics.median(cpus):6.3f} s (best {min(cpus):6.3f}){extra}")


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=120) as answer:
        return len(answer.read())


BUILD = """
import sys, time
from pathlib import Path
from anchorage.report.runs import LocalRuns
from anchorage.viewer.app import Viewer
viewer = Viewer(LocalRuns(Path(sys.argv[1]).parent), ttl=0.0)
for _ in range(int(sys.argv[2])):
    cpu = time.process_time()
    page = viewer.campaign_page(Path(sys.argv[1]).name)
    print(time.process_time() - cpu, len(page.encode()))
"""

REBUILD = """
import sys, time
from pathlib import Path
from anchorage.report.writing import rebuild
cpu = time.process_time()
out = rebuild(Path(sys.argv[1]))
print(time.process_time() - cpu, out["html"].stat().st_size)
"""


def in_tree(tree: Path, code: str, *args: str) -> list[list[float]]:
    """Run ``code`` with ``tree``'s operator/ first on the import path; its lines of numbers."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'operator'}{os.pathsep}{tree / 'devcluster'}"}
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True,
                          timeout=3600)
    return [[float(x) for x in line.split()] for line in done.stdout.splitlines() if line.strip()]


def side_by_side(before: Path, folder: Path, rounds: int) -> None:
    for label, tree in (("before", before), ("after", REPO)):
        built = in_tree(tree, BUILD, str(folder), str(rounds))
        cpus = [b[0] for b in built]
        print(f"page build, {label:<6}  CPU median {statistics.median(cpus):6.3f} s (best {min(cpus):6.3f})   "
              f"{built[0][1] / 1e6:.2f} MB   ({tree})")
    copy = folder.parent / "before-report" / folder.name
    shutil.copytree(folder, copy)
    [[cpu, size]] = in_tree(before, REBUILD, str(copy))
    print(f"report (rebuild), before  CPU {cpu:6.3f} s   report.html {size / 1e6:.2f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="Another checkout whose viewer and report to measure beside.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anchorage-bench-viewer-") as tmp:
        started = time.perf_counter()
        folder = write_run(Path(tmp), args.trials)
        print(f"wrote {args.trials} trials in {time.perf_counter() - started:.1f} s ({folder})")

        def floor() -> object:
            return LocalRuns(folder.parent).campaign(folder.name).board

        walls, cpus = measure(floor, args.rounds)
        print(line("floor (read + board)", walls, cpus))
        floor_cpu = statistics.median(cpus)
        for label, ttl in (("page, uncached", 0.0), ("page, cached", 3600.0)):
            server = BackgroundServer(make_app(LocalRuns(folder.parent), ttl=ttl), name="viewer").start()
            url = f"http://127.0.0.1:{server.port}/campaigns/{folder.name}/"
            try:
                size = get(url)                                   # warms the cache (and the imports)
                walls, cpus = measure(lambda page=url: get(page), args.rounds)
            finally:
                server.stop()
            ratio = f"   {statistics.median(cpus) / floor_cpu:.2f}x the floor's CPU" if ttl == 0 else ""
            print(line(label, walls, cpus, f"   {size / 1e6:.2f} MB{ratio}"))
        walls, cpus = measure(lambda: rebuild(folder), 1)
        report = (folder / "report.html").stat().st_size
        print(line("report (rebuild)", walls, cpus, f"   report.html {report / 1e6:.2f} MB"))
        if args.before is not None:
            side_by_side(args.before.resolve(), folder, args.rounds)


if __name__ == "__main__":
    main()
