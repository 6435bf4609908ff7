"""The process a fetch runs: huggingface_hub's own snapshot_download into this node's HF cache.

Run by the agent as ``python -m sparksync_agent.models.fetch_hf``; the token,
when there is one, arrives in ``HF_TOKEN`` (its environment, never argv).
It prints JSON lines on stdout: ``{"total": bytes}`` once the file list is
known, then ``{"path": snapshot}`` when done; errors go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sparksync_agent.models.fetch_hf")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--revision", default="main")
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--allow", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        print(
            "huggingface_hub is not installed on this node: install the agent with its 'hf' extra "
            "(pip install 'sparksync-agent[hf]')",
            file=sys.stderr,
        )
        return 3
    common = dict(
        repo_id=args.repo, revision=args.revision, cache_dir=args.cache_dir,
        allow_patterns=args.allow or None,
    )  # fmt: skip
    try:
        plan = snapshot_download(**common, dry_run=True)
        total = sum(f.file_size or 0 for f in plan)
        print(json.dumps({"total": total, "files": len(plan)}), flush=True)
        path = snapshot_download(**common)
    except Exception as exc:  # huggingface_hub's errors say what went wrong; the agent reports them
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"path": str(path)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
