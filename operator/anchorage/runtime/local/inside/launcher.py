"""In-sandbox launcher: loopback TCP → gateway unix socket forwarder, then the agent.

Run by the local sandbox runner as ``python3 launcher.py PORT SOCKET STDOUT STDERR -- AGENT ARGV...``
inside the sandbox's private network namespace. It opens STDOUT and STDERR (the agent's log files, by
their in-sandbox paths, so that no descriptor links to a host path; ``-`` keeps the descriptors it was
given) as its standard output and error, listens on ``127.0.0.1:PORT`` (the only address an agent can
reach), relays every connection byte for byte to the gateway's unix socket bound into the sandbox,
and once the listener is up reports ``started`` on its stdin — the engine's status pipe, written
before any agent code runs, so only a launcher that could not listen leaves it silent (the platform's
failure) — replaces its stdin by ``/dev/null``, starts the agent and exits with the agent's exit
status (128 + signal number when the agent was killed by a signal). Standard library only: it runs
with whatever interpreter the sandbox has, and never imports anchorage.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

_CHUNK = 65536


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                sock.shutdown(how)


def _relay(client: socket.socket, gateway_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(gateway_path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, gateway_path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_relay, args=(client, gateway_path), daemon=True).start()


def _report_started() -> None:
    """Tell the engine the sandbox is up (stdin is its status pipe), then give stdin to /dev/null."""
    with contextlib.suppress(OSError):
        os.write(0, b"started launcher\n")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _open_logs(stdout: str, stderr: str) -> None:
    """Make the agent's log files (by their in-sandbox paths) our standard output and error."""
    for path, target in ((stdout, 1), (stderr, 2)):
        if path != "-":
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(fd, target)
            os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) < 6 or argv[4] != "--":
        sys.stderr.write("usage: launcher.py PORT SOCKET STDOUT STDERR -- AGENT ARGV...\n")
        return 2
    port, gateway_path, agent = int(argv[0]), argv[1], argv[5:]
    _open_logs(argv[2], argv[3])  # an error here ends us before the start is reported: the platform's failure
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, gateway_path), daemon=True).start()
    _report_started()
    try:
        child = subprocess.Popen(agent)
    except OSError as exc:
        sys.stderr.write(f"anchorage: cannot start agent {agent[0]!r}: {exc}\n")
        return 127
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # do not wait for relay threads still attached to idle connections
