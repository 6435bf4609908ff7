"""``sparksync app list | add | remove | open``: custom apps on the nodes, as in the tray's menu.

``open`` starts the app's script on the node (if it has one), opens the
tunnel, prints the local URL (and opens the browser with ``--browser``),
then keeps both until Ctrl-C, when the tunnel closes and the script stops.
"""

from __future__ import annotations

import json
import signal
import threading
import webbrowser

import click

from sparksync.core.nodes import ClusterActions
from sparksync.core.apps import DGX_DASHBOARD, CustomApp, CustomApps


@click.group("app")
def app() -> None:
    """Custom apps: a web app on a node, reached through an SSH tunnel."""


@app.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the apps as JSON.")
def list_apps(as_json: bool) -> None:
    """List the custom apps (the DGX Dashboard is built in)."""
    apps = [DGX_DASHBOARD, *CustomApps().list()]
    if as_json:
        click.echo(json.dumps([a.model_dump(mode="json") for a in apps], indent=2))
        return
    for a in apps:
        extras = [
            f"script: {a.start_script!r}" if a.start_script else "",
            f"browser: {a.browser_path}" if a.browser_path else "",
        ]
        click.echo(f"{a.name}  (port {a.remote_port})  " + "  ".join(x for x in extras if x))


@app.command("add")
@click.argument("name")
@click.option(
    "--port", "remote_port", type=click.IntRange(1, 65535), required=True, help="Port on the node's loopback."
)
@click.option("--script", "start_script", help="Shell commands run on the node while the app is open.")
@click.option("--browser-path", help="Open the browser at this path (e.g. /lab) once the tunnel is up.")
@click.option("--replace", is_flag=True, help="Replace an app of the same name.")
def add_app(
    name: str, remote_port: int, start_script: str | None, browser_path: str | None, replace: bool
) -> None:
    """Add custom app NAME."""
    try:
        entry = CustomApp(
            name=name, remote_port=remote_port, start_script=start_script, browser_path=browser_path
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc).splitlines()[-1]) from exc
    CustomApps().add(entry, replace=replace)
    click.echo(f"Added {name!r} (port {remote_port}).")


@app.command("remove")
@click.argument("name")
def remove_app(name: str) -> None:
    """Remove custom app NAME."""
    CustomApps().remove(name)
    click.echo(f"Removed {name!r}.")


@app.command("open")
@click.argument("node")
@click.argument("name")
@click.option("--browser", is_flag=True, help="Open the browser at the app's path.")
@click.option("--timeout", type=click.FloatRange(min=1), default=30.0, show_default=True)
def open_app(node: str, name: str, browser: bool, timeout: float) -> None:
    """Open app NAME on NODE until Ctrl-C."""
    actions = ClusterActions()
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        session = actions.open_app(node, actions.apps.get(name), timeout)
        url = session.url or f"127.0.0.1:{session.tunnel.local_port}"
        click.echo(f"{name} on {node}: {url}  (Ctrl-C closes it)")
        if browser and session.url:
            if not session.wait_ready(timeout, stop):
                click.echo(
                    f"sparksync: warning: nothing answers on port {session.app.remote_port} of {node} yet",
                    err=True,
                )
            webbrowser.open(session.url)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        actions.close()
    click.echo(f"Closed {name} on {node}.", err=True)
