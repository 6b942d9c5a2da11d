"""Which HTTP/1.1 server for the gateway's model API: its own (``anchorage.gateway.http``) or a well-kept one.

Run: ``.venv/bin/python bench/http_servers.py`` (``--help`` for options; under ``flock /work/coord/bench.lock``).
Candidates, each in a process of its own on the last CPU (this client on the others): the gateway's own server
(httptools on asyncio protocols, uvloop, with its front door), uvicorn (its httptools protocol, uvloop; an ASGI app)
and aiohttp's server (uvloop). Each serves one route doing what the gateway does before its handler: read the bearer
token from the head, compare it, answer a small JSON (no token: 401). Granian is not measured: it runs its own
worker processes, so it can neither live in the engine's process (where the local gateway runs) nor open a trial's
socket while running.

Two things are measured, side by side in one run:

* *CPU per request*: the server process's user + system CPU (``/proc``) over ``--requests`` keep-alive POSTs from
  ``--concurrency`` clients, divided by the requests (the median over ``--rounds`` rounds, servers in rotated order);
* *the attacks the front door must hold*, against each server at once: ``Expect: 100-continue`` without a token and
  a 60 MB body announced (what comes back first: 401, or 100 and the server waiting for the body); a 240 KB head sent
  in one write and in 4 KB writes (refused, or answered 200); a slowloris connection sending one byte of a head a
  second (closed when, if within ``--slow-seconds``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from anchorage_devcluster.ports import free_port

REPO = Path(__file__).resolve().parents[1]
TOKEN = "bench-token"
SERVERS = ("own", "uvicorn", "aiohttp")
BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
ANSWER = b'{"id": "x", "object": "chat.completion", "choices": []}'


# ----- the servers (child processes) -----------------------------------------------------------------------


def serve(name: str, port: int) -> None:
    import logging

    import uvloop

    logging.basicConfig(level=logging.CRITICAL)  # the probes' refusals are what they are: not logged here
    logging.getLogger("aiohttp").setLevel(logging.CRITICAL)

    if name == "own":
        from anchorage.gateway.gatewayconfig import FrontDoorConfig
        from anchorage.gateway.http import HttpServer, Reply, Request, json_reply

        def gate(request: Request) -> Reply | None:
            if request.headers.get(b"authorization") != b"Bearer " + TOKEN.encode():
                return json_reply(401, {"error": "no token"}, close=True)
            return None

        async def handler(request: Request) -> Reply:
            return Reply(200, ANSWER, b"Content-Type: application/json\r\n")

        async def main() -> None:
            limits = FrontDoorConfig(max_connections_per_client=4096, max_connections_per_token=4096)
            server = HttpServer(handler, limits=limits, gate=gate)
            await server.start_tcp("127.0.0.1", port)
            await asyncio.Event().wait()

        uvloop.run(main())
    elif name == "uvicorn":
        import uvicorn

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != b"Bearer " + TOKEN.encode():
                await send({"type": "http.response.start", "status": 401, "headers": [(b"connection", b"close")]})
                await send({"type": "http.response.body", "body": b'{"error": "no token"}'})
                return
            more = True
            while more:
                message = await receive()
                more = message.get("more_body", False)
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": ANSWER})

        uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, loop="uvloop", http="httptools",
                                      log_level="warning", access_log=False, lifespan="off")).run()
    else:
        from aiohttp import web

        async def handle(request: web.Request) -> web.Response:
            if request.headers.get("Authorization") != f"Bearer {TOKEN}":
                return web.Response(status=401, body=b'{"error": "no token"}', headers={"Connection": "close"})
            await request.read()
            return web.Response(body=ANSWER, content_type="application/json")

        application = web.Application()
        application.router.add_post("/v1/chat/completions", handle)
        uvloop.install()
        web.run_app(application, host="127.0.0.1", port=port, access_log=None, print=None)


# ----- the client -------------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(port: int, requests: int, concurrency: int) -> float:
    """Send ``requests`` POSTs from ``concurrency`` keep-alive clients; the seconds it took."""
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    per = requests // concurrency
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
        async def worker() -> None:
            for _ in range(per):
                async with session.post(url, data=BODY, headers=headers) as response:
                    await response.read()
                    assert response.status == 200, response.status

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.monotonic() - started


async def first_answer(port: int, data: bytes, *, pieces: int = 1, wait: float = 3.0) -> str:
    """Send ``data`` (in ``pieces`` writes) and say what came back first (its status line, or what happened)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        return type(exc).__name__
    step = -(-len(data) // pieces)
    try:
        for at in range(0, len(data), step):
            writer.write(data[at:at + step])
            await writer.drain()
        line = await asyncio.wait_for(reader.readline(), wait)
        return line.decode("latin-1").strip() or "closed"
    except TimeoutError:
        return f"nothing within {wait:g} s"
    except OSError as exc:
        return type(exc).__name__
    finally:
        writer.close()


async def slow_head(port: int, limit: float) -> str:
    """Send a head one byte a second; when did the server close (or answer)?"""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n" + "X-Slow: " +
            "s" * 4000 + "\r\n").encode()
    started = time.monotonic()
    try:
        for byte in head:
            if time.monotonic() - started > limit:
                return f"still open after {limit:g} s"
            writer.write(bytes([byte]))
            try:
                got = await asyncio.wait_for(reader.read(100), 1.0)
            except TimeoutError:
                continue
            what = got.split(b"\r\n", 1)[0].decode("latin-1") or "closed"
            return f"{what} after {time.monotonic() - started:.1f} s"
        return "the whole head went in"
    except OSError as exc:
        return f"{type(exc).__name__} after {time.monotonic() - started:.1f} s"
    finally:
        writer.close()


async def probes(ports: dict[str, int], slow_seconds: float) -> dict[str, dict[str, str]]:
    big = "".join(f"X-Pad-{i}: {'p' * 1000}\r\n" for i in range(240))
    bare = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 62914560\r\nExpect: 100-continue\r\n\r\n"
    padded = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n{big}"
              f"Content-Length: {len(BODY)}\r\n\r\n").encode() + BODY

    async def one(port: int) -> dict[str, str]:
        expect, whole, pieces, slow = await asyncio.gather(
            first_answer(port, bare), first_answer(port, padded), first_answer(port, padded, pieces=len(padded) // 4096),
            slow_head(port, slow_seconds))
        return {"expect 100 without token": expect, "240 KB head, one write": whole,
                "240 KB head, 4 KB writes": pieces, "a byte a second": slow}

    answers = await asyncio.gather(*(one(port) for port in ports.values()))
    return dict(zip(ports, answers, strict=True))


def wait_up(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"no server on port {port}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20000, help="requests per server per round and concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slow-seconds", type=float, default=30.0, help="how long the slowloris probe waits")
    parser.add_argument("--serve", nargs=2, metavar=("NAME", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return
    cpus = sorted(os.sched_getaffinity(0))
    ports = {name: free_port() for name in SERVERS}
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator")}
    children = {name: subprocess.Popen([sys.executable, "-P", __file__, "--serve", name, str(port)], env=env)
                for name, port in ports.items()}
    try:
        if len(cpus) > 1:
            for child in children.values():
                os.sched_setaffinity(child.pid, {cpus[-1]})
            os.sched_setaffinity(0, set(cpus[:-1]))
        for port in ports.values():
            wait_up(port)
        for concurrency in args.concurrency:
            per: dict[str, list[float]] = {name: [] for name in SERVERS}
            for number in range(args.rounds):
                order = SERVERS[number % len(SERVERS):] + SERVERS[:number % len(SERVERS)]
                for name in order:
                    before = cpu_seconds(children[name].pid)
                    asyncio.run(load(ports[name], args.requests, concurrency))
                    per[name].append((cpu_seconds(children[name].pid) - before) / args.requests * 1e6)
            for name in SERVERS:
                print(f"{concurrency:4d} clients  {name:8s} CPU per request: {statistics.median(per[name]):6.1f} µs "
                      f"(rounds: {', '.join(f'{v:.0f}' for v in per[name])})")
        for name, answers in asyncio.run(probes(ports, args.slow_seconds)).items():
            for probe, what in answers.items():
                print(f"{name:8s} {probe:26s} {what}")
    finally:
        for child in children.values():
            child.send_signal(signal.SIGTERM)
        for child in children.values():
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()


if __name__ == "__main__":
    main()
