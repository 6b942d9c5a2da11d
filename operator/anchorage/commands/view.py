"""``anchorage view RUNS``: browse campaign runs in a web browser (a runs folder or an ``s3://`` prefix).

Registered by :mod:`anchorage.cli`. Serves :func:`anchorage.viewer.app.make_app` with aiohttp on
127.0.0.1 until interrupted; nothing to build or install beyond the package. Exit 2 when RUNS is not a
folder or store it can read, or the port is taken.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("view")(view)


def view(
    runs: str = typer.Argument(..., help="A runs folder (runs/), one campaign's folder (runs/demo), or an S3 prefix "
                               "(s3://bucket/prefix; endpoint and credentials as for the store: AWS_ENDPOINT_URL, "
                               "AWS_ACCESS_KEY_ID, ...)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (the default serves this machine "
                             "only; the pages show agents' output and logs)."),
    port: int = typer.Option(8765, "--port", help="TCP port (0 picks a free one)."),
    ttl: float = typer.Option(5.0, "--refresh", help="Seconds a campaign's records are cached (a running campaign's "
                              "pages are at most this old)."),
) -> None:
    """Serve a web viewer: campaigns → leaderboard → entry × task → trial → transcript, with sortable tables.

    Links are stable (share them); a table's sort and filter are kept in the link.
    """
    import asyncio

    from aiohttp import web

    from anchorage.errors import InputError
    from anchorage.report.runs import open_runs
    from anchorage.viewer.app import make_app

    source = open_runs(runs)
    campaigns = source.campaigns()
    app = make_app(source, ttl=ttl)

    async def serve() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}",
                             hint="pick another --port (0 picks a free one)") from exc
        bound = runner.addresses[0][1]
        typer.echo(f"viewing {len(campaigns)} campaign(s) of {source.location} at http://{host}:{bound}/ "
                   "(Ctrl-C stops)")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        typer.echo("stopped")
