"""``anchorage agents install|list``: the pinned agent CLIs (codex, claude-code, opencode) on this machine.

Registered by :mod:`anchorage.cli`; the code is :mod:`anchorage.agentclis`. ``install`` fetches the versions pinned
in ``anchorage/agentclis/versions.json`` from npm into ``<cache>/agents/<cli>@<version>`` (the folder the
sandbox binds read-only); ``list`` shows each pinned CLI and whether it is installed. Exit 2 on an
unknown name, 1 when an install fails.

The command keeps its name, ``agents``, though the package is ``agentclis``: it is what users type (the README's
first steps, ``make agents``, the hint of a missing CLI, :func:`anchorage.agentclis.install_hint`) and, on the
command line, nothing else is called ``agents`` (the agent kinds have no command).
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
    from anchorage import agentclis
    from anchorage.agentclis.installing import InstallError
    from anchorage.agentclis.installing import install as install_one
    from anchorage.errors import InputError

    pinned = agentclis.pins()
    wanted = [n for n in (names or ["all"]) if n != "all"] or list(pinned)
    if "all" in (names or []):
        wanted = list(pinned)
    unknown = [n for n in wanted if n not in pinned]
    if unknown:
        raise InputError(f"unknown agent CLI {', '.join(map(repr, unknown))}",
                         hint=f"use one of: {', '.join(pinned)} or all")
    root = agentclis.tools_root()
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

    from anchorage import agentclis

    if as_json:
        from anchorage.commands import print_json

        rows = []
        for name in agentclis.pins():
            found = agentclis.state(name)
            rows.append({"kind": name, "package": found.pin.package, "version": found.pin.version,
                         "installed": found.installed, "folder": str(found.folder) if found.installed else None,
                         "install": None if found.installed else agentclis.install_hint(name),
                         "in_sandbox": f"{agentclis.bin_dir(name)}/{found.pin.command}"})
        print_json(rows)
        return

    table = Table(title=f"agent CLIs (pinned in anchorage/agentclis/versions.json; installed under {agentclis.tools_root()})")
    for column in ("kind", "package", "version", "installed", "in the sandbox"):
        table.add_column(column)
    for name in agentclis.pins():
        found = agentclis.state(name)
        where = str(found.folder) if found.installed else f"no — run: {agentclis.install_hint(name)}"
        table.add_row(name, found.pin.package, found.pin.version, where, f"{agentclis.bin_dir(name)}/{found.pin.command}")
    Console(width=200).print(table)
