"""Gateway overhead: streamed requests through the gateway vs. straight to the mock upstream.

Run: ``.venv/bin/python bench/gateway.py`` (add ``--help`` for options). The mock upstream and the
gateway each run in their own process (as in production, no shared GIL with the client); the client
runs N concurrent streaming chat requests, alternating direct and gateway rounds so both see the same
machine load, and prints side by side:

* p50 / p99 of the request latency (send → last byte) and of time to first byte, direct and through
  the gateway, and the *added* latency (gateway − direct);
* throughput (completed streams per second) and its ratio gateway / direct.

Goals (issue 5): added p50 ≤ 2 ms, throughput ≥ 90 % of direct. The mock streams ``--chunks``
chunks ``--chunk-delay`` seconds apart (a model generating tokens); ``--chunk-delay 0`` measures the
CPU-bound worst case instead.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
SECRET = "bench-secret"
MARKER = "[[bench]]"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ----- the two servers (child processes) -----------------------------------------------------------


def serve_mock(port: int, chunks: int, chunk_delay: float) -> None:
    from anchorage.gateway.mock import MockConfig, MockUpstream, ReplyRule

    reply = "".join(f"token{i:04d} " for i in range(chunks * 2))  # 20 chars per chunk
    config = MockConfig(replies=[ReplyRule(marker=MARKER, reply=reply)], stream_chunk_chars=20,
                        chunk_delay_seconds=chunk_delay)
    run_until_terminated(MockUpstream(config).app(), port)


def serve_gateway(port: int, upstream: str) -> None:
    import logging

    from anchorage.gateway import GatewayConfig
    from anchorage.gateway.running import build_app

    logging.basicConfig(level=logging.WARNING)
    os.environ["BENCH_SECRET"] = SECRET
    config = GatewayConfig(upstreams=[{"name": "mock", "base_url": upstream}],  # type: ignore[list-item]
                           port=port, token_secret_env="BENCH_SECRET")
    app, _ledger = build_app(config)
    run_until_terminated(app, port)


def run_until_terminated(app: Any, port: int) -> None:
    """Serve ``app`` (on the gateway's event loop choice: uvloop when installed) until SIGTERM."""
    from anchorage.gateway import BackgroundServer

    server = BackgroundServer(app, port=port).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop()


def spawn(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator")}
    return subprocess.Popen([sys.executable, __file__, *args], env=env)


def wait_up(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except OSError as exc:
            if getattr(exc, "code", None):  # any HTTP answer means it listens
                return
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up within {timeout} s")


# ----- the client ------------------------------------------------------------------------------------


@dataclass
class Round:
    latencies: list[float]
    first_bytes: list[float]
    seconds: float

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds


async def one(session: aiohttp.ClientSession, url: str, token: str, index: int) -> tuple[float, float]:
    # include_usage on both paths: the gateway would add it, and the usage chunk is one more frame
    body = {"model": "mock-model", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"{MARKER} request {index}"}]}
    start = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json=body,
                            headers={"Authorization": f"Bearer {token}"}) as response:
        first = None
        async for _chunk in response.content.iter_any():
            first = first or time.perf_counter()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    end = time.perf_counter()
    return end - start, (first or end) - start


async def run_round(url: str, token: str, concurrency: int, requests: int) -> Round:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for index in range(requests):
            queue.put_nowait(index)
        results: list[tuple[float, float]] = []

        async def worker() -> None:
            while not queue.empty():
                results.append(await one(session, url, token, queue.get_nowait()))

        await one(session, url, token, -1)  # warm the connection pool
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - start
    return Round([r[0] for r in results], [r[1] for r in results], seconds)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def merge(rounds: list[Round]) -> Round:
    return Round([x for r in rounds for x in r.latencies], [x for r in rounds for x in r.first_bytes],
                 sum(r.seconds for r in rounds))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a child process (Linux /proc), independent of machine load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(direct_url: str, gateway_url: str, token: str, concurrency: int, requests: int,
            repeats: int, gateway_pid: int) -> dict[str, float]:
    direct, through = [], []
    gateway_cpu = 0.0
    for _ in range(repeats):  # alternate so both see the same background load
        direct.append(asyncio.run(run_round(direct_url, "unused", concurrency, requests)))
        before = cpu_seconds(gateway_pid)
        through.append(asyncio.run(run_round(gateway_url, token, concurrency, requests)))
        gateway_cpu += cpu_seconds(gateway_pid) - before
    d, g = merge(direct), merge(through)
    return {
        "concurrency": concurrency, "requests": len(g.latencies),
        "direct_p50_ms": 1e3 * pct(d.latencies, 0.5), "gateway_p50_ms": 1e3 * pct(g.latencies, 0.5),
        "added_p50_ms": 1e3 * (pct(g.latencies, 0.5) - pct(d.latencies, 0.5)),
        "direct_p99_ms": 1e3 * pct(d.latencies, 0.99), "gateway_p99_ms": 1e3 * pct(g.latencies, 0.99),
        "added_p99_ms": 1e3 * (pct(g.latencies, 0.99) - pct(d.latencies, 0.99)),
        "added_ttfb_p50_ms": 1e3 * (pct(g.first_bytes, 0.5) - pct(d.first_bytes, 0.5)),
        "direct_rps": d.throughput, "gateway_rps": g.throughput,
        "throughput_ratio": g.throughput / d.throughput,
        "direct_mean_ms": 1e3 * statistics.fmean(d.latencies),
        "gateway_cpu_ms_per_request": 1e3 * gateway_cpu / (len(g.latencies) + repeats),
    }


def print_table(rows: list[dict[str, float]]) -> None:
    head = (f"{'streams':>7} {'reqs':>5} | {'p50 direct':>10} {'p50 gw':>8} {'added':>7} | {'p99 direct':>10} "
            f"{'p99 gw':>8} {'added':>7} | {'ttfb added':>10} | {'rps direct':>10} {'rps gw':>8} {'ratio':>6} | "
            f"{'gw cpu/req':>10}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['concurrency']:>7.0f} {r['requests']:>5.0f} | {r['direct_p50_ms']:>8.2f}ms "
              f"{r['gateway_p50_ms']:>6.2f}ms {r['added_p50_ms']:>5.2f}ms | {r['direct_p99_ms']:>8.2f}ms "
              f"{r['gateway_p99_ms']:>6.2f}ms {r['added_p99_ms']:>5.2f}ms | {r['added_ttfb_p50_ms']:>8.2f}ms | "
              f"{r['direct_rps']:>10.1f} {r['gateway_rps']:>8.1f} {r['throughput_ratio']:>6.1%} | "
              f"{r['gateway_cpu_ms_per_request']:>8.2f}ms")
    print("goals: added p50 <= 2 ms, throughput ratio >= 90 %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--requests-per-stream", type=int, default=4,
                        help="requests per concurrent stream (at least 40 per round)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating direct/gateway rounds")
    parser.add_argument("--chunks", type=int, default=40, help="SSE content chunks per stream")
    parser.add_argument("--chunk-delay", type=float, default=0.005, help="seconds between chunks (0: CPU-bound)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--serve-mock", nargs=3, metavar=("PORT", "CHUNKS", "DELAY"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-gateway", nargs=2, metavar=("PORT", "UPSTREAM"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_mock:
        return serve_mock(int(args.serve_mock[0]), int(args.serve_mock[1]), float(args.serve_mock[2]))
    if args.serve_gateway:
        return serve_gateway(int(args.serve_gateway[0]), args.serve_gateway[1])

    sys.path.insert(0, str(REPO / "operator"))
    from anchorage.gateway.ledger import mint_token

    mock_port, gateway_port = free_port(), free_port()
    direct_url, gateway_url = f"http://127.0.0.1:{mock_port}", f"http://127.0.0.1:{gateway_port}"
    children = [spawn("--serve-mock", str(mock_port), str(args.chunks), str(args.chunk_delay)),
                spawn("--serve-gateway", str(gateway_port), direct_url)]
    try:
        wait_up(direct_url + "/v1/models")
        wait_up(gateway_url + "/healthz")
        token = mint_token(SECRET.encode(), "bench-trial")
        loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
        print(f"event loop: {loop}; mock: {args.chunks} chunks, {args.chunk_delay * 1e3:g} ms apart; cpus: {os.cpu_count()}; "
              f"load average: {os.getloadavg()[0]:.1f}")
        rows = [measure(direct_url, gateway_url, token, c, max(c * args.requests_per_stream, 40), args.repeats,
                        children[1].pid) for c in args.concurrency]
        print_table(rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    finally:
        for child in children:
            child.terminate()
            child.wait(timeout=10)


if __name__ == "__main__":
    main()
