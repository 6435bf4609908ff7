"""``sparksync model ...``: where each model is, fetching on a node, copying to nodes, deleting.

    sparksync model list [NODE]... [--json]
    sparksync model fetch REPO --node N [--revision R] [--endpoint URL] [--json]
    sparksync model copy NAME --to N... [--from NODE | --from this-computer] [--json]
    sparksync model delete NAME --node N... [--partial]
    sparksync model roots NODE [--store PATH] [--hf-cache PATH] [--extra PATH]... [--json]
    sparksync model token set|clear

Nodes are the paired ones and this computer (``local`` or ``this-computer``).
A copy prints per node its bytes, GB/s and ETA: a bar on a terminal, one JSON
line per step with ``--json`` (and a summary line at the end).
"""

from __future__ import annotations

import json
import sys
import threading
import click
from sparksync_agent.protocol import ModelJob, RootsConfig

from sparksync.core.base import SparkSyncError
from sparksync.core.fleet import Fleet
from sparksync.core.models import (
    CopyCancelled,
    CopyEvent,
    CopyReport,
    ModelCopy,
    ModelNodes,
    build_matrix,
    fetch_model,
    forget_token,
    store_token,
    stored_token,
)


@click.group()
def model() -> None:
    """Models on the nodes: list, fetch, copy, delete."""


@model.command("list")
@click.argument("names", nargs=-1, metavar="[NODE]...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_context
def list_(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> None:
    """The model × node matrix: present (verified), partial or missing, with sizes and free space."""
    with Fleet() as fleet:
        nodes = ModelNodes(fleet)
        wanted = nodes.names(names or None)
        matrix = build_matrix(nodes.listings(wanted))
    if as_json:
        click.echo(json.dumps(matrix.to_json(), indent=2))
    else:
        click.echo(_matrix_text(matrix))
    if any(c.error for c in matrix.nodes):
        ctx.exit(3)


def _matrix_text(matrix) -> str:
    names = [c.name for c in matrix.nodes]
    width = max([len("MODEL"), *(len(m) for m in matrix.models)]) + 2
    cols = [max(len(n), 12) + 2 for n in names]
    lines = ["MODEL".ljust(width) + "SIZE".rjust(10) + "  " + "".join(n.ljust(w) for n, w in zip(names, cols))]
    for name in matrix.models:
        size = matrix.sizes.get(name)
        row = name.ljust(width) + (_size(size) if size is not None else "-").rjust(10) + "  "
        for node, w in zip(names, cols):
            cell = matrix.cell(name, node)
            mark = {"present": "present", "partial": "partial", "missing": "-", "unknown": "?"}[cell.state]
            row += mark.ljust(w)
        lines.append(row)
    if not matrix.models:
        lines.append("(no models on these nodes)")
    free = "FREE".ljust(width) + "".rjust(10) + "  "
    for column, w in zip(matrix.nodes, cols):
        free += ("error" if column.error else _size(column.free_bytes) if column.free_bytes is not None else "?").ljust(w)
    lines.append(free)
    for column in matrix.nodes:
        if column.error:
            lines.append(f"{column.name}: cannot ask its agent: {column.error}")
    return "\n".join(lines)


@model.command("fetch")
@click.argument("repo")
@click.option("--node", "node", required=True, help="The node that downloads it ('local' is this computer).")
@click.option("--revision", default="main", show_default=True)
@click.option("--endpoint", default=None, help="A hub mirror's URL (HF_ENDPOINT on the node).")
@click.option("--no-token", is_flag=True, help="Do not send the token kept in the keyring.")
@click.option("--json", "as_json", is_flag=True, help="Progress as JSON lines.")
def fetch_(repo: str, node: str, revision: str, endpoint: str | None, no_token: bool, as_json: bool) -> None:
    """The node downloads REPO from a Hugging Face hub itself (huggingface_hub), into its HF cache."""
    token = None if no_token else _token_or_none()
    bar = _Bars(as_json)
    cancel = threading.Event()

    def show(job: ModelJob) -> None:
        bar.fetch(node, job)

    with Fleet() as fleet:
        try:
            job = fetch_model(ModelNodes(fleet), node, repo, revision=revision, endpoint=endpoint, token=token,
                        on_progress=show, cancel=cancel)  # fmt: skip
        except KeyboardInterrupt:
            cancel.set()
            raise CopyCancelled(f"the fetch of {repo} was stopped") from None
    bar.end()
    if as_json:
        click.echo(json.dumps({"event": "summary", **job.model_dump(mode="json")}))
    else:
        where = job.model.directory if job.model else "its Hugging Face cache"
        click.echo(f"{repo} is on {node}: {_size(job.bytes_done)} in {where}")


def _token_or_none():
    try:
        return stored_token()
    except SparkSyncError:
        return None  # no keyring: a public repo still downloads


@model.command("copy")
@click.argument("name")
@click.option("--to", "targets", multiple=True, required=True, help="A target node (repeat for several).")
@click.option("--from", "source", default=None,
              help="The source node, or 'this-computer'; default: a node that has it.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Progress as JSON lines, then a summary line.")
@click.pass_context
def copy(ctx: click.Context, name: str, targets: tuple[str, ...], source: str | None, as_json: bool) -> None:
    """Copy NAME to every --to node: rsync over SSH, fanned out, verified by sha256."""
    bars = _Bars(as_json)
    with Fleet() as fleet:
        copier = ModelCopy(ModelNodes(fleet), bars.copy)
        try:
            report = copier.run(name, list(targets), source)
        finally:
            bars.end()
    _print_report(report, as_json)
    if not report.ok:
        ctx.exit(7)


def _print_report(report: CopyReport, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.to_json()))
        return
    click.echo(f"{report.name} ({_size(report.size_bytes)}) from {report.source} in {report.seconds:.1f} s:")
    for r in report.results:
        how = f" from {r.source} ({r.route_detail or r.route})" if r.source and r.state in ("copied", "repaired") else ""
        extra = f"; re-copied {', '.join(r.recopied)}" if r.recopied else ""
        said = r.message if r.message and r.message != r.route_detail else None
        click.echo(f"  {r.node}: {r.state}{how}{extra}" + (f": {said}" if said else ""))
    if report.relayed:
        click.echo("Some copies were relayed through this computer: those nodes cannot ssh to each other yet.")


@model.command("delete")
@click.argument("name")
@click.option("--node", "nodes", multiple=True, required=True, help="Where to delete it (repeatable).")
@click.option("--partial", is_flag=True, help="Delete the unfinished copy instead.")
def delete(name: str, nodes: tuple[str, ...], partial: bool) -> None:
    """Delete NAME on the nodes; refused on a node where a running workload uses it."""
    with Fleet() as fleet:
        models = ModelNodes(fleet)
        failures = []
        for node in models.names(nodes):
            try:
                models.call(node, lambda c: c.delete_model(name, partial))
                click.echo(f"{node}: deleted {name}")
            except SparkSyncError as exc:
                failures.append(exc)
                click.echo(f"{node}: {exc}", err=True)
    if failures:
        raise failures[0]


@model.command("roots")
@click.argument("node")
@click.option("--store", default=None, help="SparkSync's models folder on the node (copies land here).")
@click.option("--hf-cache", default=None, help="The node's Hugging Face hub cache.")
@click.option("--extra", multiple=True, help="Another folder with models (repeatable).")
@click.option("--json", "as_json", is_flag=True)
def roots(node: str, store: str | None, hf_cache: str | None, extra: tuple[str, ...], as_json: bool) -> None:
    """Show the node's model roots and free space; with options, set them."""
    with Fleet() as fleet:
        models = ModelNodes(fleet)
        if store or hf_cache or extra:
            old = models.call(node, lambda c: c.model_roots())
            new = RootsConfig(store=store or old.store, hf_cache=hf_cache or old.hf_cache,
                              extra=list(extra) or old.extra)  # fmt: skip
            models.call(node, lambda c: c.set_model_roots(new))
        listing = models.listing(node, manifests=False)
    if as_json:
        click.echo(json.dumps({"node": node, "roots": [r.model_dump(mode="json") for r in listing.roots]}))
        return
    for root in listing.roots:
        free = _size(root.free_bytes) if root.free_bytes is not None else "?"
        click.echo(f"{root.kind.value:<9} {root.path}  ({free} free{'' if root.exists else ', not made yet'})")


@model.group("token")
def token() -> None:
    """The Hugging Face token fetches send (kept in the keyring only)."""


@token.command("set")
def token_set() -> None:
    """Read the token from stdin (never from the command line) and keep it in the keyring."""
    value = sys.stdin.readline().strip() if not sys.stdin.isatty() else click.prompt("token", hide_input=True)
    if not value:
        raise click.UsageError("no token given")
    store_token(value)
    click.echo("The token is kept in the keyring; `model fetch` sends it to the node that downloads.")


@token.command("clear")
def token_clear() -> None:
    """Remove the token from the keyring."""
    click.echo("The token was removed." if forget_token() else "No token was kept.")


# --- progress -------------------------------------------------------------------------------------


class _Bars:
    """A bar per node on a terminal, JSON lines with --json, plain lines otherwise."""

    def __init__(self, as_json: bool):
        self.as_json = as_json
        self.tty = sys.stdout.isatty() and not as_json
        self.rows: dict[str, str] = {}
        self.drawn = 0
        self.lock = threading.Lock()

    def copy(self, event: CopyEvent) -> None:
        with self.lock:
            if self.as_json:
                click.echo(json.dumps(event.to_json()))
                return
            self.rows[event.node] = _bar_line(event.node, event.phase, event.bytes_done, event.bytes_total,
                                              event.rate_bps, event.eta_s, event.route, event.message)  # fmt: skip
            self._draw(event.phase in ("done", "failed", "present", "cancelled", "recopying"))

    def fetch(self, node: str, job: ModelJob) -> None:
        with self.lock:
            if self.as_json:
                click.echo(json.dumps({"event": "progress", **job.model_dump(mode="json", exclude={"model"})}))
                return
            elapsed = max((job.finished_at or __import__("time").time()) - job.started_at, 1e-6)
            rate = job.bytes_done / elapsed if job.bytes_done else None
            eta = (job.bytes_total - job.bytes_done) / rate if rate and job.bytes_total else None
            self.rows[node] = _bar_line(node, job.state.value if job.state.finished else "fetching", job.bytes_done,
                                        job.bytes_total, rate, eta, None, job.message)  # fmt: skip
            self._draw(job.state.finished)

    def _draw(self, final: bool) -> None:
        if self.tty:
            if self.drawn:
                sys.stdout.write(f"\x1b[{self.drawn}F")
            for line in self.rows.values():
                sys.stdout.write("\x1b[2K" + line + "\n")
            self.drawn = len(self.rows)
            sys.stdout.flush()
        elif final:
            click.echo(list(self.rows.values())[-1] if self.rows else "")

    def end(self) -> None:
        if self.tty and self.drawn:
            sys.stdout.flush()  # the bars stay as drawn; the summary follows below them


def _bar_line(node: str, phase: str, done: int, total: int, rate: float | None, eta: float | None,
              route: str | None, message: str | None) -> str:  # fmt: skip
    width = 24
    filled = int(width * done / total) if total else 0
    bar = "#" * filled + "." * (width - filled)
    parts = [f"{node:<14}", f"[{bar}]", f"{_size(done):>9} / {_size(total):<9}"]
    if rate:
        parts.append(f"{rate / 1e9:.3f} GB/s")
    if eta is not None and phase in ("copying", "fetching", "relaying"):
        parts.append(f"ETA {eta:4.0f} s")
    parts.append(phase + (f" ({route})" if route else ""))
    if message and phase in ("failed", "recopying", "cancelled", "done", "waiting"):
        parts.append(message)
    return "  ".join(parts)


def _size(n: float | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"

