"""Benchmark of a campaign's verification-panel calls: one sandboxed process per call vs a plain process.

Run: ``.venv/bin/python bench/panel_calls.py [--calls 40]``. Starts the local gateway in front of the labelled mock model
and sends the same verifier conversation ``--calls`` times through
:class:`anchorage.runtime.local.verifying.SandboxedModelClient` with the trial sandbox (bubblewrap/unshare:
namespaces, binds, cgroup, per-call token) and unsandboxed (the same script as a plain process),
alternating call by call in one run; prints the median wall time per call of each, their ratio and
difference — the price of isolating every call as its own process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "operator"))

from anchorage.runtime.local import sandbox  # noqa: E402
from anchorage.runtime.local.gatewaystart import start_local_gateway  # noqa: E402
from anchorage.runtime.local.verifying import SandboxedModelClient  # noqa: E402

MESSAGES = [{"role": "system", "content": "You are a verifier."},
            {"role": "user", "content": "[anchorage-verify v1 role=verifier problem=bench] Is 2 + 2 = 4 proven?"}]


def interleaved(gateway: object, mechanisms: list[sandbox.Mechanism], calls: int, folder: Path) -> dict[str, list[float]]:
    """Per mechanism, the wall time of each call; the mechanisms alternate call by call (same load for both)."""
    clients = {m: SandboxedModelClient(gateway, m, folder / m, f"bench-{m}", "bench") for m in mechanisms}
    samples: dict[str, list[float]] = {m: [] for m in mechanisms}
    for index in range(calls):
        for mechanism, client in clients.items():
            started = time.perf_counter()
            client.complete(MESSAGES, model="mock-bench", seed=index, run_id=f"bench/x/verifier{index}")
            samples[mechanism].append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    mechanism = sandbox.detect_mechanism()
    local = start_local_gateway()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            samples = interleaved(local.gateway, ["none", mechanism], args.calls, Path(tmp))
            plain, boxed = samples["none"], samples[mechanism]
    finally:
        local.stop()
    plain_ms, boxed_ms = statistics.median(plain) * 1000, statistics.median(boxed) * 1000
    print(f"{args.calls} calls each, medians per call (gateway + mock model included in both):")
    print(f"  plain process:      {plain_ms:7.1f} ms")
    print(f"  sandboxed ({mechanism}): {boxed_ms:7.1f} ms")
    print(f"  ratio sandboxed/plain: {boxed_ms / plain_ms:.2f}×, isolation cost {boxed_ms - plain_ms:+.1f} ms per call")


if __name__ == "__main__":
    main()
