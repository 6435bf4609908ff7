"""``sparksync-agent``: serve, supervise, status and version."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sparksync_agent._version import PROTOCOL_VERSION
from sparksync_agent._version import __version__ as AGENT_VERSION
from sparksync_agent.errors import AgentError, AgentNotRunningError
from sparksync_agent.paths import default_state_dir

# The wire models (pydantic) and the runtime load only for the commands that use them:
# `version` (deploy's check of a new venv) and `supervise` (a long-lived parent) stay light.
if TYPE_CHECKING:
    from sparksync_agent.protocol import AgentStatus

log = logging.getLogger("sparksync_agent")


def _sample_hz(text: str) -> float:
    value = float(text)
    if not 1.0 <= value <= 10.0:
        raise argparse.ArgumentTypeError(f"--sample-hz must be between 1 and 10, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparksync-agent", description="SparkSync node agent")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the agent in the foreground (logs to stderr)")
    serve.add_argument("--port", type=int, default=0, help="API port on 127.0.0.1 (0 picks a free one)")
    serve.add_argument("--state-dir", type=Path, default=None, help="token, node id and endpoint live here")
    serve.add_argument("--sample-hz", type=_sample_hz, default=1.0, help="sampling rate, 1 to 10 (default 1)")
    serve.add_argument("--advertise", action=argparse.BooleanOptionalAction, default=False,
                       help="publish _sparksync._tcp over mDNS")
    serve.add_argument("--interface", action="append", default=[], metavar="IP",
                       help="advertise on this IPv4 address only (repeatable)")
    serve.add_argument("--ssh-port", type=int, default=22, help="SSH port to advertise (default 22)")
    serve.add_argument("--metrics-public", action="store_true",
                       help="serve /metrics without the token (for a local Prometheus)")
    serve.add_argument("--parent-pid", type=int, default=None, metavar="PID",
                       help="stop when process PID exits (used by the desktop app's local agent)")
    serve.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    status = sub.add_parser("status", help="ask the running agent on this node for its state")
    status.add_argument("--state-dir", type=Path, default=None)
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    sub.add_parser("version", help="print the agent and protocol versions")
    _add_supervise_parser(sub)
    return parser


def _add_supervise_parser(sub: argparse._SubParsersAction) -> None:
    sup = sub.add_parser("supervise", help="run 'serve' as a child and restart it when it exits (no systemd)")
    sup.add_argument("--pid-file", type=Path, required=True, help="the supervisor writes its pid here")
    sup.add_argument("--log-file", type=Path, required=True, help="supervisor and agent log (appended)")
    sup.add_argument("--state-file", type=Path, default=None, help="JSON: child pid, starts, last exit")
    sup.add_argument("--state-dir", type=Path, default=None, help="the agent's --state-dir")
    sup.add_argument("--sample-hz", type=_sample_hz, default=1.0, help="the agent's --sample-hz")
    sup.add_argument("--advertise", action=argparse.BooleanOptionalAction, default=False,
                     help="the agent's --advertise")


def cmd_supervise(args: argparse.Namespace) -> int:
    from sparksync_agent.supervise import SuperviseOptions, supervise

    serve_args = ["--port", "0", "--state-dir", str(args.state_dir or default_state_dir())]
    serve_args += ["--sample-hz", f"{args.sample_hz:g}"] + (["--advertise"] if args.advertise else [])
    return supervise(SuperviseOptions(args.pid_file, args.log_file, args.state_file, serve_args))


def cmd_serve(args: argparse.Namespace) -> int:
    from sparksync_agent.daemon import serve  # the server stack loads only for 'serve'
    from sparksync_agent.runtime import AgentOptions

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    options = AgentOptions(
        state_dir=args.state_dir or default_state_dir(),
        port=args.port,
        sample_hz=args.sample_hz,
        advertise=args.advertise,
        interfaces=args.interface,
        metrics_public=args.metrics_public,
        ssh_port=args.ssh_port,
        parent_pid=args.parent_pid,
    )
    serve(options)
    return 0


def fetch_status(state_dir: Path, timeout: float = 5.0) -> AgentStatus:
    import urllib.error
    import urllib.request

    from sparksync_agent.protocol import AgentStatus
    from sparksync_agent.state import read_endpoint, read_token

    endpoint = read_endpoint(state_dir)
    token = read_token(state_dir)
    if endpoint is None or token is None:
        raise AgentNotRunningError(
            f"no agent is running for {state_dir}; start it with 'sparksync-agent serve' "
            "or 'systemctl --user start sparksync-agent'"
        )
    request = urllib.request.Request(
        f"http://127.0.0.1:{endpoint.port}/v1/status", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return AgentStatus.model_validate_json(response.read())
    except (urllib.error.URLError, OSError) as exc:
        raise AgentNotRunningError(
            f"the agent for {state_dir} (pid {endpoint.pid}, port {endpoint.port}) did not answer: {exc}"
        ) from exc


def cmd_status(args: argparse.Namespace) -> int:
    status = fetch_status(args.state_dir or default_state_dir())
    if args.json:
        print(status.model_dump_json(indent=2))
        return 0
    print(f"agent {status.agent_version} (protocol {status.protocol_version}), pid {status.pid}")
    print(f"node {status.node_id}, up {status.uptime_s:.0f} s, {status.sample_hz:g} Hz, seq {status.last_seq}")
    for c in status.collectors:
        print(f"  {c.name:10} {'on' if c.enabled else 'off: ' + (c.reason or '')}")
    return 0


def cmd_version(_: argparse.Namespace) -> int:
    print(f"sparksync-agent {AGENT_VERSION} (protocol {PROTOCOL_VERSION})")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = {"serve": cmd_serve, "status": cmd_status, "version": cmd_version, "supervise": cmd_supervise}[
        args.command
    ]
    try:
        return handler(args)
    except AgentError as exc:
        print(f"sparksync-agent: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
