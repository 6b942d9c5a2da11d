"""Gateway overhead: json and streamed requests through the gateway vs. straight to the mock upstream.

Run: ``.venv/bin/python bench/gateway.py`` (``--help`` for options). Four kinds of process: the mock
upstream, the gateway (optionally a second, older gateway from ``--before COMMIT`` for a before/after
column), the two floors (a bare aiohttp proxy, a byte pipe) and the load client (this process). By
default (``--pin split``, what ``taskset`` would do, through ``os.sched_setaffinity``) the gateway(s)
and floors run alone on the last CPU and the mock and the client share the others, so what the gateway
costs is not hidden by (or charged to) the load it relays.
``--pin mock`` gives the mock a CPU of its own instead (the mock paces its stream with a sleep after
each write, so a process sharing its CPU slows the *upstream* down, measured +7 ms over a 40-chunk
stream); ``--pin none`` leaves placement to the kernel.

Each *round* runs, for one kind of request (``json``: a whole chat completion; ``stream``: a streamed
one) at one concurrency N, the same batch of requests (N workers, each sending ``--requests-per-stream``
requests one after the other) against every target — direct, gateway (, before) — in an order rotated
from round to round, so each target sees the same background load. The client keeps one warm
connection pool per target for the whole run.

Definitions (all per concurrency, the median over ``--rounds`` rounds):

* *request time*: from sending the request to the last byte of the answer; *TTFB*: to the first byte
  (for a stream the first chunk, for a json answer nearly its whole time);
* *added p50 / p99*: ``p50(request time via gateway) − p50(request time direct)`` (resp. p99), both
  taken within the same round; *added TTFB p50* likewise;
* *throughput*: completed requests per second of the round; *ratio*: gateway / direct of the same round;
* *gateway CPU per request* (json) and *per chunk* (streams): user + system CPU of the gateway process
  (``/proc/<pid>/stat``) over all its rounds of that kind divided by the requests answered, resp. the
  SSE frames relayed — far less sensitive to machine load than any time (it still moves ~±15 %: a busy
  loop handles several requests or chunks per wake-up). The CPU of the mock and of the client per
  request is printed too, and *cores*: the CPU seconds the round's processes used per second — when it
  stays far below the CPUs there are, other load decided the round.

Before/after in one run: ``--before COMMIT`` (or a directory holding a complete older tree, e.g. made by
``git worktree add DIR COMMIT``) runs that tree's gateway as one more target — in its own process with its
own ``operator/`` on the import path, against the same mock, from the same client, with the same pinning.
The *floor* target (leave it out with ``--no-floor``) is a bare pass-through proxy on aiohttp, the gateway's
stack until it got its own HTTP server and client (aiohttp server, one aiohttp ClientSession, uvloop; no
token, parsing, metering or retries; streams relayed with ``iter_any`` + ``write``): what that stack itself
costs, so whether a goal is reachable on it at all;
*floor-tcp* is lower still: a byte pipe on uvloop (one upstream connection per client connection, no HTTP
parsing at all), what any user-space proxy written in Python pays here for the syscalls and the loop.
The mock and the client run on asyncio's loop; the gateway on its own choice (uvloop when importable,
as in production) unless ``--gateway-loops`` says otherwise — ``--gateway-loops asyncio uvloop`` benches
both side by side. ``--ledger-dir DIR`` adds the current gateway journalling its ledger (fsynced per
request, as the chart's gateway does) as ``gateway+ledger``.

Goals: gateway CPU ≤ 0.25 ms per json request and ≤ 20 µs per relayed chunk, added first byte ≤ 2 ms
at 50 concurrent streams (and, from earlier rounds, added p50 ≤ 2 ms, throughput ≥ 90 % of direct). The
mock streams ``--chunks`` content chunks ``--chunk-delay`` seconds apart (a model generating tokens);
``--chunk-delay 0`` measures the CPU-bound worst case instead. A json answer is the same text, whole.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from anchorage_devcluster.ports import free_port

REPO = Path(__file__).resolve().parents[1]
SECRET = "bench-secret"
MARKER = "[[bench]]"


# ----- the servers (child processes) ---------------------------------------------------------------


def serve_mock(port: int, chunks: int, chunk_delay: float) -> None:
    from anchorage.gateway.mock import MockConfig, MockUpstream, ReplyRule

    reply = "".join(f"token{i:04d} " for i in range(chunks * 2))  # 20 chars per chunk
    config = MockConfig(replies=[ReplyRule(marker=MARKER, reply=reply)], stream_chunk_chars=20,
                        chunk_delay_seconds=chunk_delay)
    run_until_terminated(MockUpstream(config).app(), port, uvloop=False)


def serve_floor(port: int, upstream: str) -> None:
    """The floor: a bare pass-through proxy on aiohttp (server, one ClientSession, uvloop) — the gateway's
    stack until it got its own HTTP server and client — with no token, no parsing, no metering, no retries;
    streams relayed with ``iter_any`` + ``write``. What that stack costs before a proxy does anything."""
    import aiohttp
    from aiohttp import web

    session_key: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)

    async def session(app: web.Application) -> Any:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False,
                                         cookie_jar=aiohttp.DummyCookieJar()) as client:
            app[session_key] = client
            yield

    async def proxy(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with request.app[session_key].post(upstream + request.raw_path, data=body,
                                                 headers={"Content-Type": "application/json"}) as answer:
            if answer.content_type != "text/event-stream":
                return web.Response(body=await answer.read(), status=answer.status, content_type=answer.content_type)
            response = web.StreamResponse(status=answer.status, headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", proxy)
    app.cleanup_ctx.append(session)
    run_until_terminated(app, port, uvloop=True)


def serve_tcp_floor(port: int, upstream: str) -> None:
    """The lowest floor: a byte pipe on uvloop (one upstream connection per client connection, bytes copied
    as they arrive both ways, no HTTP at all): what relaying costs any user-space proxy in Python here."""
    import asyncio
    from urllib.parse import urlsplit

    from anchorage.gateway.running import new_event_loop

    address = urlsplit(upstream)

    class Pipe(asyncio.Protocol):
        def __init__(self, peer: Pipe | None = None) -> None:
            self.peer, self.transport, self.pending = peer, None, bytearray()

        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            if self.peer is None:  # the client's side: open the upstream's
                loop.create_task(self.connect())
            else:
                self.peer.peer = self
                if self.peer.pending:
                    transport.write(bytes(self.peer.pending))

        async def connect(self) -> None:
            await loop.create_connection(lambda: Pipe(self), address.hostname, address.port)

        def data_received(self, data: bytes) -> None:
            if self.peer is not None and self.peer.transport is not None:
                self.peer.transport.write(data)
            else:
                self.pending += data

        def connection_lost(self, exc: Exception | None) -> None:
            if self.peer is not None and self.peer.transport is not None:
                self.peer.transport.close()

    loop = new_event_loop()
    loop.run_until_complete(loop.create_server(Pipe, "127.0.0.1", port, backlog=1024))
    signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    loop.run_forever()


def serve_gateway(port: int, upstream: str, tree: str, loop: str, ledger_dir: str, token_file: str) -> None:
    """One gateway process: this tree's gateway, or (``tree`` set) the one of a ``--before`` tree, whose
    ``operator/`` is then first on the import path; it writes a trial token of its own making to
    ``token_file`` (token formats differ between versions)."""
    import logging

    if loop != "default":
        os.environ["ANCHORAGE_EVENT_LOOP"] = loop
    if loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        raise SystemExit("--gateway-loops uvloop: uvloop is not importable (pip install uvloop, or --site DIR)")
    from anchorage.gateway import GatewayConfig
    from anchorage.gateway.running import build_app

    if tree != "-":
        import anchorage

        assert Path(anchorage.__file__).resolve().is_relative_to(Path(tree).resolve()), anchorage.__file__
    logging.basicConfig(level=logging.WARNING)
    os.environ["BENCH_SECRET"] = SECRET
    extra: dict[str, Any] = {"ledger_dir": ledger_dir} if ledger_dir != "-" else {}
    if "front_door" in GatewayConfig.model_fields:  # all the load comes from one address with one token: the
        extra["front_door"] = {"max_connections_per_client": 4096, "max_connections_per_token": 4096}  # caps above it
    config = GatewayConfig(upstreams=[{"name": "mock", "base_url": upstream}],
                           port=port, token_secret_env="BENCH_SECRET", **extra)
    app, ledger = build_app(config)
    Path(token_file).write_text(ledger.issue("bench-trial"))
    if importlib.util.find_spec("anchorage.gctuning") is not None:  # as `anchorage gateway` does (since it exists)
        from anchorage.gctuning import tune_gc

        tune_gc()
    run_until_terminated(app, port, uvloop=True)


def before_tree(spec: str) -> Path:
    """The complete tree to run the "before" gateway from: ``spec`` is a directory holding ``operator/anchorage``
    (e.g. ``git worktree add /tmp/gw-before COMMIT``) or a commit of this repository, exported once with
    ``git archive`` to a directory under the temporary folder (reused by later runs)."""
    given = Path(spec)
    if given.is_dir():
        if not (given / "operator" / "anchorage" / "__init__.py").is_file():
            raise SystemExit(f"--before {spec}: not a complete tree of this repository (no operator/anchorage/ "
                             "there); pass a commit, or a directory made by `git worktree add DIR COMMIT`")
        return given.resolve()
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{spec}^{{commit}}"],
                                check=True, capture_output=True, text=True).stdout.strip()
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"--before {spec}: neither a directory nor a commit of {REPO} ({exc.stderr.strip()})") from exc
    target = Path(tempfile.gettempdir()) / f"anchorage-before-{commit[:12]}"
    if not (target / "operator" / "anchorage" / "__init__.py").is_file():
        partial = Path(tempfile.mkdtemp(prefix=f"anchorage-before-{commit[:12]}-"))
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        if not target.exists():
            partial.rename(target)
    print(f"before: commit {commit[:12]} from {target}", file=sys.stderr)
    return target


def run_until_terminated(app: Any, port: int, *, uvloop: bool) -> None:
    """Serve ``app`` until SIGTERM (``uvloop``: the gateway's choice, uvloop when importable)."""
    import inspect

    from anchorage.gateway import BackgroundServer

    # a --before copy may predate the uvloop argument: it then picks its loop from ANCHORAGE_EVENT_LOOP alone
    choice = {"uvloop": uvloop} if "uvloop" in inspect.signature(BackgroundServer).parameters else {}
    server = BackgroundServer(app, port=port, **choice).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop()


def spawn(cpus: set[int] | None, site: Path | None, *args: str, tree: Path = REPO) -> subprocess.Popen[bytes]:
    """A child process running this script with ``args``, importing ``anchorage`` from ``tree``'s ``operator/``."""
    path = [str(site)] if site else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(tree / "operator")])}
    child = subprocess.Popen([sys.executable, "-P", __file__, *args], env=env)
    if cpus:
        os.sched_setaffinity(child.pid, cpus)  # threads created later inherit it
    return child


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), independent of machine load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ----- the client ------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    url: str
    token: str
    pid: int | None  # the gateway process whose CPU is counted (None: direct)
    session: aiohttp.ClientSession | None = None


@dataclass
class Round:
    kind: str
    target: str
    latencies: list[float]
    first_bytes: list[float]
    seconds: float
    cpu: dict[str, float] = field(default_factory=dict)  # process -> CPU seconds during the round

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds


KINDS = ("json", "stream")


def request_body(kind: str, index: int) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"{MARKER} request {index}"}]
    if kind == "json":
        return {"model": "mock-model", "messages": messages}
    # include_usage on both paths: the gateway would add it, and the usage chunk is one more frame
    return {"model": "mock-model", "stream": True, "stream_options": {"include_usage": True}, "messages": messages}


async def one(target: Target, kind: str, index: int) -> tuple[float, float]:
    assert target.session is not None
    start = time.perf_counter()
    async with target.session.post(target.url + "/v1/chat/completions", json=request_body(kind, index),
                                   headers={"Authorization": f"Bearer {target.token}"}) as response:
        first = None
        async for _chunk in response.content.iter_any():
            first = first or time.perf_counter()
        if response.status != 200:
            raise RuntimeError(f"{target.url}: HTTP {response.status}")
    end = time.perf_counter()
    return end - start, (first or end) - start


async def frames_per_stream(target: Target) -> int:
    """SSE frames (``data:`` events) in one streamed answer, counted once."""
    assert target.session is not None
    async with target.session.post(target.url + "/v1/chat/completions", json=request_body("stream", -1),
                                   headers={"Authorization": f"Bearer {target.token}"}) as response:
        return (await response.read()).count(b"data:")


async def run_round(target: Target, kind: str, concurrency: int, requests: int, pids: dict[str, int]) -> Round:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(requests):
        queue.put_nowait(index)
    results: list[tuple[float, float]] = []

    async def worker() -> None:
        while not queue.empty():
            results.append(await one(target, kind, queue.get_nowait()))

    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()} | {"client": own_cpu_seconds()}
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - start
    cpu_after = {name: cpu_seconds(pid) for name, pid in pids.items()} | {"client": own_cpu_seconds()}
    return Round(kind, target.name, [r[0] for r in results], [r[1] for r in results], seconds,
                 {name: cpu_after[name] - cpu_before[name] for name in cpu_before})


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def med(values: list[float]) -> float:
    return statistics.median(values)


def summarise(kind: str, concurrency: int, rounds: list[dict[str, Round]], target: str, frames: int) -> dict[str, Any]:
    """One row of the table: medians over rounds; CPU per request (per chunk) over all rounds of ``target``."""
    own = [r[target] for r in rounds]
    direct = [r["direct"] for r in rounds]
    streams = sum(len(r.latencies) for r in own)
    row: dict[str, Any] = {
        "kind": kind, "concurrency": concurrency, "target": target, "rounds": len(own),
        "requests_per_round": len(own[0].latencies),
        "p50_ms": 1e3 * med([pct(r.latencies, 0.5) for r in own]),
        "p99_ms": 1e3 * med([pct(r.latencies, 0.99) for r in own]),
        "ttfb_p50_ms": 1e3 * med([pct(r.first_bytes, 0.5) for r in own]),
        "rps": med([r.throughput for r in own]),
        "cores": med([sum(r.cpu.get(name, 0.0) for name in ("mock", "client", target)) / r.seconds for r in own]),
        "mock_cpu_us_per_request": 1e6 * sum(r.cpu["mock"] for r in own) / streams,
        "client_cpu_us_per_request": 1e6 * sum(r.cpu["client"] for r in own) / streams,
    }
    if target != "direct":
        pairs = list(zip(own, direct, strict=True))
        row |= {
            "added_p50_ms": 1e3 * med([pct(g.latencies, 0.5) - pct(d.latencies, 0.5) for g, d in pairs]),
            "added_p99_ms": 1e3 * med([pct(g.latencies, 0.99) - pct(d.latencies, 0.99)
                                       for g, d in pairs]),
            "added_ttfb_p50_ms": 1e3 * med([pct(g.first_bytes, 0.5) - pct(d.first_bytes, 0.5)
                                            for g, d in pairs]),
            "throughput_ratio": med([g.throughput / d.throughput for g, d in pairs]),
            "gateway_cpu_us_per_request": 1e6 * sum(r.cpu[target] for r in own) / streams,
        }
        if kind == "stream":
            row["gateway_cpu_us_per_chunk"] = 1e6 * sum(r.cpu[target] for r in own) / (streams * frames)
    return row


async def bench(targets: list[Target], pids: dict[str, int],
                args: argparse.Namespace) -> tuple[list[dict[str, Any]], int]:
    rows: list[dict[str, Any]] = []
    for target in targets:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=300)
        target.session = aiohttp.ClientSession(connector=connector)
    try:
        frames = await frames_per_stream(targets[0])
        for kind in args.kinds:
            for concurrency in args.concurrency:
                requests = max(concurrency * args.requests_per_stream, 20)
                for target in targets:  # warm each pool to this concurrency
                    await asyncio.gather(*(one(target, kind, -1) for _ in range(concurrency)))
                rounds: list[dict[str, Round]] = []
                for index in range(args.rounds):
                    order = targets[index % len(targets):] + targets[:index % len(targets)]
                    rounds.append({t.name: await run_round(t, kind, concurrency, requests, pids) for t in order})
                rows += [summarise(kind, concurrency, rounds, t.name, frames) for t in targets]
    finally:
        for target in targets:
            if target.session is not None:
                await target.session.close()
    return rows, frames


def cell(row: dict[str, Any], key: str, unit: str = "ms", width: int = 8) -> str:
    if key not in row:
        return f"{'-':>{width}}"
    value = row[key]
    if unit == "%":
        return f"{value:>{width}.1%}"
    return f"{value:>{width - len(unit)}.{0 if unit == 'µs' else 2}f}{unit}"


def print_table(rows: list[dict[str, Any]], frames: int) -> None:
    head = (f"{'kind':>6} {'N':>4} {'target':>21} | {'p50':>8} {'p99':>8} {'ttfb p50':>8} | {'+p50':>8} "
            f"{'+p99':>8} {'+ttfb':>8} | {'req/s':>7} {'ratio':>7} {'cores':>5} | {'gw/req':>8} {'gw/chunk':>8} "
            f"{'mock/req':>9} {'clnt/req':>9}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['kind']:>6} {r['concurrency']:>4} {r['target']:>21} | {cell(r, 'p50_ms')} {cell(r, 'p99_ms')} "
              f"{cell(r, 'ttfb_p50_ms')} | {cell(r, 'added_p50_ms')} {cell(r, 'added_p99_ms')} "
              f"{cell(r, 'added_ttfb_p50_ms')} | {r['rps']:>7.1f} {cell(r, 'throughput_ratio', '%', 7)} {r['cores']:>5.2f} | "
              f"{cell(r, 'gateway_cpu_us_per_request', 'µs')} {cell(r, 'gateway_cpu_us_per_chunk', 'µs')} "
              f"{cell(r, 'mock_cpu_us_per_request', 'µs', 9)} {cell(r, 'client_cpu_us_per_request', 'µs', 9)}")
    print(f"{frames} SSE frames per stream; + = added vs. direct in the same round (median over rounds); "
          "cores = CPU seconds the bench's processes (mock, client, that target's gateway) used per second "
          "of the round; CPU per request/chunk from /proc (much less load-dependent than times)")
    print("goals: gateway CPU <= 250 µs per json request and <= 20 µs per relayed chunk; added first byte (+ttfb) "
          "<= 2 ms at 50 concurrent streams")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                        help="json: whole chat completions; stream: streamed ones")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--requests-per-stream", type=int, default=4,
                        help="requests per concurrent stream in a round (at least 20 per round)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per concurrency (targets rotated)")
    parser.add_argument("--chunks", type=int, default=40, help="SSE content chunks per stream")
    parser.add_argument("--chunk-delay", type=float, default=0.005, help="seconds between chunks (0: CPU-bound)")
    parser.add_argument("--before", metavar="COMMIT|DIR",
                        help="also bench the gateway of an older tree (a 'before' column): a commit of this "
                             "repository (exported with git archive) or a directory holding a complete tree "
                             "(git worktree add DIR COMMIT); it runs in its own process with its own operator/ "
                             "on the import path")
    parser.add_argument("--no-floor", action="store_true",
                        help="leave out the floor columns: 'floor' (a bare aiohttp pass-through proxy on uvloop) "
                             "and 'floor-tcp' (a byte pipe on uvloop, no HTTP)")
    parser.add_argument("--pin", choices=["none", "split", "mock"], default="split",
                        help="split: gateway(s) alone on the last CPU, mock and client on the others (the "
                             "gateway's own cost is measured); mock: the mock alone on the first CPU, gateway(s) "
                             "and client on the others (a provider's pace does not depend on our CPU); none: "
                             "no pinning")
    parser.add_argument("--site", type=Path, metavar="DIR",
                        help="extra import path for all processes, e.g. a 'pip install --target DIR uvloop' "
                             "where uvloop is not installed (the gateway then runs on it)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--serve-mock", nargs=3, metavar=("PORT", "CHUNKS", "DELAY"), help=argparse.SUPPRESS)
    parser.add_argument("--gateway-loops", nargs="+", choices=["default", "asyncio", "uvloop"], default=["default"],
                        help="event loop(s) of the gateway processes: each gateway package is benched once per "
                             "loop listed, side by side (default: uvloop when importable, else asyncio; the mock "
                             "and the client always use the default)")
    parser.add_argument("--ledger-dir", type=Path, metavar="DIR",
                        help="also bench the current gateway journalling its usage ledger (fsynced, as the "
                             "chart's gateway does) into a fresh subdirectory of DIR: targets '...+ledger'")
    parser.add_argument("--serve-gateway", nargs=6, metavar=("PORT", "UPSTREAM", "TREE", "LOOP", "LEDGER", "TOKEN"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", nargs=3, metavar=("PORT", "UPSTREAM", "KIND"), help=argparse.SUPPRESS)
    return parser.parse_args()


def pinning(mode: str, cpus: list[int]) -> tuple[set[int] | None, set[int] | None, set[int] | None]:
    """CPUs of (mock, gateways, client) for ``--pin`` (None: not pinned)."""
    if len(cpus) < 2 or mode == "none":
        return None, None, None
    if mode == "mock":
        return {cpus[0]}, set(cpus[1:]), set(cpus[1:])
    return set(cpus[:-1]), {cpus[-1]}, set(cpus[:-1])


def main() -> None:
    args = parse_args()
    if args.serve_mock:
        return serve_mock(int(args.serve_mock[0]), int(args.serve_mock[1]), float(args.serve_mock[2]))
    if args.serve_gateway:
        return serve_gateway(int(args.serve_gateway[0]), *args.serve_gateway[1:])
    if args.serve_floor:
        serve = serve_floor if args.serve_floor[2] == "aiohttp" else serve_tcp_floor
        return serve(int(args.serve_floor[0]), args.serve_floor[1])

    sys.path[:0] = [*([str(args.site)] if args.site else []), str(REPO / "operator")]
    from anchorage.gateway.running import new_event_loop

    mock_cpus, gateway_cpus, client_cpus = pinning(args.pin, sorted(os.sched_getaffinity(0)))
    cpus = sorted(os.sched_getaffinity(0))
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)
    mock_port = free_port()
    direct_url = f"http://127.0.0.1:{mock_port}"
    children = {"mock": spawn(mock_cpus, args.site, "--serve-mock", str(mock_port), str(args.chunks), str(args.chunk_delay))}
    tokens = Path(tempfile.mkdtemp(prefix="bench-gateway-tokens-"))
    targets = [Target("direct", direct_url, "unused", None)]
    for floor, kind in [] if args.no_floor else [("floor", "aiohttp"), ("floor-tcp", "tcp")]:
        port = free_port()
        children[floor] = spawn(gateway_cpus, args.site, "--serve-floor", str(port), direct_url, kind)
        (tokens / floor).write_text("unused")
        targets.append(Target(floor, f"http://127.0.0.1:{port}", str(tokens / floor), children[floor].pid))
    trees = ({"before": before_tree(args.before)} if args.before else {}) | {"gateway": REPO}
    variants = [(tree_name, tree, loop_name, journal)
                for tree_name, tree in trees.items() for loop_name in args.gateway_loops
                for journal in ([False, True] if args.ledger_dir and tree == REPO else [False])]
    for tree_name, tree, loop_name, journal in variants:
        name = (tree_name if len(args.gateway_loops) == 1 else f"{tree_name}:{loop_name}") + \
            ("+ledger" if journal else "")
        port = free_port()
        ledger = tempfile.mkdtemp(prefix=f"{name.replace(':', '-')}-", dir=args.ledger_dir) if journal else "-"
        token_file = tokens / name.replace(":", "-")
        children[name] = spawn(gateway_cpus, args.site, "--serve-gateway", str(port), direct_url,
                               "-" if tree == REPO else str(tree), loop_name, ledger, str(token_file), tree=tree)
        targets.append(Target(name, f"http://127.0.0.1:{port}", str(token_file), children[name].pid))
    try:
        wait_up(direct_url + "/v1/models")
        for target in targets[1:]:
            wait_up(target.url + "/healthz")  # any HTTP answer will do (the current gateway wants a token there)
            target.token = Path(target.token).read_text()  # the file's name until the gateway wrote it
        default = "uvloop" if importlib.util.find_spec("uvloop") and os.environ.get("ANCHORAGE_EVENT_LOOP") != "asyncio" \
            else "asyncio"
        loops = " ".join(default if name == "default" else name for name in args.gateway_loops)
        load_start = os.getloadavg()
        print(f"event loop of mock and client: asyncio; of the gateway(s): {loops}; "
              f"ledger journals (+ledger): {args.ledger_dir or 'none'}; "
              f"mock: {args.chunks} chunks, {args.chunk_delay * 1e3:g} ms apart; "
              f"cpus: {len(cpus)}; pin: {args.pin}; rounds: {args.rounds}; "
              f"load average at start: {' '.join(f'{x:.2f}' for x in load_start)}")
        pids = {name: child.pid for name, child in children.items()}
        with asyncio.Runner(loop_factory=lambda: new_event_loop(prefer_uvloop=False)) as runner:
            rows, frames = runner.run(bench(targets, pids, args))
        print_table(rows, frames)
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.json:
            args.json.write_text(json.dumps({"load_start": load_start, "load_end": os.getloadavg(),
                                             "args": {k: str(v) for k, v in vars(args).items()}, "rows": rows},
                                            indent=1))
    finally:
        for child in children.values():
            child.terminate()
            child.wait(timeout=10)


if __name__ == "__main__":
    main()
