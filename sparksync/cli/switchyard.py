"""``sparksync switchyard ...``: the routing gateway, its explanations and its eval.

    sparksync switchyard serve --config FILE
    sparksync switchyard explain REQUEST.json [--config FILE] [--pool NAME] [--json]
    sparksync switchyard eval --cases FILE --config FILE [--concurrency C] [--max-tokens N]
                              [--out FILE] [--json]

Without --config, the commands read ``switchyard.toml`` from SparkSync's config directory.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import click

from sparksync.core.paths import config_dir, data_dir
from sparksync.switchyard.config import SwitchyardConfig, load_config
from sparksync.switchyard.errors import SwitchyardError

CONFIG_NAME = "switchyard.toml"


def _config(path: Path | None) -> SwitchyardConfig:
    return load_config(path or config_dir() / CONFIG_NAME)


_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Gateway config (TOML or JSON). Default: {CONFIG_NAME} in SparkSync's config directory.",
)


@click.group()
def switchyard() -> None:
    """Route each request to a small or a large model pool, and prove it pays."""


@switchyard.command("serve")
@_config_option
def serve_command(config_path: Path | None) -> None:
    """Run the OpenAI-compatible gateway until interrupted."""
    from sparksync.switchyard.gateway import serve

    config = _config(config_path)
    config.check_bind()  # refuse an open non-loopback bind before anything starts
    click.echo(
        f"switchyard: serving on http://{config.listen.host}:{config.listen.port}/v1 "
        f"(policy {config.policy.kind}; pools {', '.join(config.pools)})",
        err=True,
    )
    try:
        asyncio.run(serve(config))
    except KeyboardInterrupt:
        pass


@switchyard.command("explain")
@click.argument("request_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_config_option
@click.option("--pool", help="Explain as if the X-Switchyard-Pool header named this pool.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def explain_command(request_file: Path, config_path: Path | None, pool: str | None, as_json: bool) -> None:
    """Show where REQUEST_FILE (a chat or completions body) would go, and why."""
    from sparksync.switchyard.explain import explain, render

    try:
        body = json.loads(request_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SwitchyardError(
            f"cannot read the request {request_file}: {exc}; pass a JSON request body"
        ) from None
    if not isinstance(body, dict):
        raise SwitchyardError(
            f"{request_file} holds no JSON object; pass the body you would POST to the gateway"
        )
    result = explain(_config(config_path), body, pool)
    click.echo(json.dumps(result.as_dict(), indent=2) if as_json else render(result))


@switchyard.command("eval")
@click.option(
    "--cases",
    "cases_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A switchyard-cases/1 file (see docs/switchyard.md).",
)
@_config_option
@click.option("--concurrency", default=8, show_default=True, type=click.IntRange(1, 1024))
@click.option(
    "--max-tokens",
    default=256,
    show_default=True,
    type=click.IntRange(1),
    help="For cases that set no max_tokens of their own.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the JSON report. Default: switchyard/eval-TIME.json in the data directory.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
def eval_command(
    cases_path: Path,
    config_path: Path | None,
    concurrency: int,
    max_tokens: int,
    out: Path | None,
    as_json: bool,
) -> None:
    """Play the cases against the gateway, the large pool alone and the small pool alone."""
    from sparksync.switchyard.eval.cases import load_cases
    from sparksync.switchyard.eval.play import play
    from sparksync.switchyard.eval.report import render, save_report

    config = _config(config_path)
    report = play(config, load_cases(cases_path), cases_path, concurrency, max_tokens)
    path = save_report(
        report, out or data_dir() / "switchyard" / f"eval-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    click.echo(report.model_dump_json(indent=2) if as_json else render(report))
    click.echo(f"report written to {path}", err=True)
