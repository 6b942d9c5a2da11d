"""``anchorage agents install|list``: the pinned agent CLIs (codex, claude-code, opencode) on this machine.

Registered by :mod:`anchorage.cli`. ``install`` fetches the versions pinned in
``anchorage/agents/versions.json`` from npm into ``<cache>/agents/<cli>@<version>`` (the folder the
sandbox binds read-only); ``list`` shows each pinned CLI and whether it is installed. Exit 2 on an
unknown name, 1 when an install fails.
"""

from __future__ import annotations

import typer

agents_app = typer.Typer(help="Install and list the pinned agent CLIs (codex, claude-code, opencode).",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(agents_app, name="agents")


@agents_app.command("install")
def install(
    names: list[str] = typer.Argument(None, help="codex, claude-code, opencode or all (default: all)."),
    npm: str = typer.Option("npm", "--npm", help="The npm program to install with."),
    as_json: bool = typer.Option(False, "--json", help="Print what was installed where as JSON (progress on stderr)."),
) -> None:
    """Install the pinned versions from npm into <cache>/agents/<cli>@<version> (skips what is there)."""
    from anchorage import agents
    from anchorage.agents.installing import InstallError
    from anchorage.agents.installing import install as install_one
    from anchorage.errors import InputError

    pinned = agents.pins()
    wanted = [n for n in (names or ["all"]) if n != "all"] or list(pinned)
    if "all" in (names or []):
        wanted = list(pinned)
    unknown = [n for n in wanted if n not in pinned]
    if unknown:
        raise InputError(f"unknown agent CLI {', '.join(map(repr, unknown))}",
                         hint=f"use one of: {', '.join(pinned)} or all")
    root = agents.tools_root()
    result: dict[str, dict[str, object]] = {}
    for name in wanted:
        try:
            path, done = install_one(root, pinned[name], npm=npm,
                                     say=(lambda text: typer.echo(text, err=True)) if as_json else typer.echo)
        except InstallError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        result[name] = {"spec": pinned[name].spec, "path": str(path), "installed_now": done}
        if not as_json:
            typer.echo(f"{pinned[name].spec}: {'installed' if done else 'already installed'} in {path}")
    if as_json:
        from anchorage.commands import print_json

        print_json(result)


@agents_app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print the CLIs as JSON.")) -> None:
    """Each pinned CLI, its version and where it is installed (or the command that installs it)."""
    from rich.console import Console
    from rich.table import Table

    from anchorage import agents

    if as_json:
        from anchorage.commands import print_json

        rows = []
        for name in agents.pins():
            found = agents.state(name)
            rows.append({"kind": name, "package": found.pin.package, "version": found.pin.version,
                         "installed": found.installed, "folder": str(found.folder) if found.installed else None,
                         "install": None if found.installed else agents.install_hint(name),
                         "in_sandbox": f"{agents.bin_dir(name)}/{found.pin.command}"})
        print_json(rows)
        return

    table = Table(title=f"agent CLIs (pinned in anchorage/agents/versions.json; installed under {agents.tools_root()})")
    for column in ("kind", "package", "version", "installed", "in the sandbox"):
        table.add_column(column)
    for name in agents.pins():
        found = agents.state(name)
        where = str(found.folder) if found.installed else f"no — run: {agents.install_hint(name)}"
        table.add_row(name, found.pin.package, found.pin.version, where, f"{agents.bin_dir(name)}/{found.pin.command}")
    Console(width=200).print(table)
