"""The pinned llama-benchy: finding it, and the exact command and environment it runs with.

SparkSync never reimplements llama-benchy's method; it runs the tool the
published figures used, at one pinned version, in a subprocess:

* offline: ``--model`` is always given (auto-detection asks a model hub), the
  tokenizer is a local file, the prompt text comes from a loopback URL, and
  ``HF_HUB_OFFLINE=1`` stops any hub lookup that might remain;
* ``--skip-coherence``: its check asks "capital of France?", which says
  nothing about speed and fails on any small or random test model;
* ``--format json --save-result`` so even an interrupted run leaves its
  partial JSON behind, and ``--emit-progress`` for the live progress events.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from sparksync.core.bench.errors import BenchToolError
from sparksync.core.bench.profile import BenchProfile

LLAMA_BENCHY_VERSION = "0.4.0"
DISTRIBUTION = "llama-benchy"
API_KEY_ENV = "SPARKSYNC_BENCH_API_KEY"
FORCE_CLOSE_ENV = "SPARKSYNC_BENCH_FORCE_CLOSE"

# Run through this bootstrap rather than the console script because:
# - a parent that ignores SIGINT (nohup, a background job) would pass that on,
#   and llama-benchy saves its partial results only when SIGINT interrupts it;
# - an API key handed over in the environment stays out of the process list;
# - against a server that closes each streamed connection (llama.cpp's), the
#   aiohttp session must not reuse connections, or requests fail at random.
#   Only the connection policy changes; llama-benchy's method is untouched.
_BOOTSTRAP = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    f"key = os.environ.pop({API_KEY_ENV!r}, None)\n"
    "if key: sys.argv += ['--api-key', key]\n"
    f"if os.environ.pop({FORCE_CLOSE_ENV!r}, None):\n"
    "    import aiohttp\n"
    "    _init = aiohttp.TCPConnector.__init__\n"
    "    def _closing(self, *args, **kwargs):\n"
    "        kwargs.pop('keepalive_timeout', None)\n"
    "        _init(self, *args, **{**kwargs, 'force_close': True})\n"
    "    aiohttp.TCPConnector.__init__ = _closing\n"
    "from llama_benchy.__main__ import main\n"
    "main()\n"
)


@dataclass(frozen=True)
class BenchyCall:
    """Everything one llama-benchy invocation needs."""

    base_url: str
    model: str
    served_model_name: str
    tokenizer: Path
    book_url: str
    profile: BenchProfile
    result_path: Path
    progress_path: Path
    one_connection_per_request: bool = False


def installed_version() -> str:
    """The installed llama-benchy version, or a BenchToolError saying how to install the pin."""
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise BenchToolError(
            f"llama-benchy is not installed in {sys.prefix}. Install the benchmark extra "
            f"(pip install 'sparksync[bench]') or pip install {DISTRIBUTION}=={LLAMA_BENCHY_VERSION}."
        ) from None
    if version != LLAMA_BENCHY_VERSION:
        raise BenchToolError(
            f"llama-benchy {version} is installed, but SparkSync's results are comparable only with "
            f"{LLAMA_BENCHY_VERSION}, the pinned version. "
            f"Run: pip install {DISTRIBUTION}=={LLAMA_BENCHY_VERSION}"
        )
    return version


def command(call: BenchyCall) -> list[str]:
    args = [
        "--base-url", call.base_url,
        "--model", call.model,
        "--served-model-name", call.served_model_name,
        "--tokenizer", str(call.tokenizer),
        "--book-url", call.book_url,
        "--skip-coherence",
        "--format", "json",
        "--save-result", str(call.result_path),
        "--emit-progress", str(call.progress_path),
        *call.profile.benchy_args(),
    ]
    return [sys.executable, "-c", _BOOTSTRAP, *args]


def environment(home: Path, api_key: str | None, one_connection_per_request: bool = False) -> dict[str, str]:
    """The child's environment: offline, and with its own HOME.

    llama-benchy caches the prompt text under ``~/.cache/llama-benchy`` keyed by
    URL; our URL has a fresh port every run, so a private HOME keeps the user's
    real cache from collecting one copy per run.
    """
    env = dict(os.environ)
    env.pop(API_KEY_ENV, None)
    env.pop(FORCE_CLOSE_ENV, None)
    env.update({
        "HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
        # The prompt server is on loopback; a proxy from the environment must not take it.
        "NO_PROXY": _with_loopback(env.get("NO_PROXY") or env.get("no_proxy") or ""),
    })
    env["no_proxy"] = env["NO_PROXY"]
    if api_key:
        env[API_KEY_ENV] = api_key
    if one_connection_per_request:
        env[FORCE_CLOSE_ENV] = "1"
    return env


def _with_loopback(no_proxy: str) -> str:
    hosts = [h for h in no_proxy.split(",") if h.strip()]
    return ",".join(hosts + [h for h in ("127.0.0.1", "localhost") if h not in hosts])
