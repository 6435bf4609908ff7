"""``switchyard calibrate``: the sweep's answer to "how little can go to the large pool?", written into the config.

Of the swept settings whose score stays within ``tolerance`` points of the
large pool alone, the one that sent the smallest share of requests to the
large pool (as measured under load) wins; between equal shares, the higher
throughput. The setting is written into the gateway's config file in place
(``policy.large_share`` or ``policy.threshold``): a TOML file keeps its
comments and layout (tomlkit), a JSON file is rewritten; both atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

from sparksync_agent.atomic import write_atomic

from sparksync.switchyard.config import load_config
from sparksync.switchyard.errors import ConfigError, EvalError
from sparksync.switchyard.eval.report import NO_SCORE
from sparksync.switchyard.eval.sweep import SweepPoint, SweepReport

DEFAULT_TOLERANCE = 1.0  # score points below large-only still counted as parity


def choose(report: SweepReport, tolerance: float = DEFAULT_TOLERANCE) -> SweepPoint:
    """The setting to keep; EvalError when there is no score to keep, or no setting keeps it."""
    anchor = report.anchor
    if report.no_score():
        raise EvalError(f"{NO_SCORE} (large-only scored 0), so there is no score to keep: nothing to calibrate "
                        "against; check the models and the cases first")  # fmt: skip
    kept = [p for p in report.swept() if p.score >= anchor.score - tolerance and p.score_errors == 0]
    if not kept:
        scores = ", ".join(f"{p.label} {p.score:.1f}" for p in report.swept())
        raise EvalError(f"no setting stays within {tolerance:g} points of large-only's {anchor.score:.1f} "
                        f"({scores}); widen --tolerance or try other values")  # fmt: skip
    return min(kept, key=lambda p: (_share(p), -(p.throughput_x or 0.0)))


def _share(point: SweepPoint) -> float:
    return 1.0 if point.large_share is None else point.large_share


def write_setting(path: Path, parameter: str, value: str) -> None:
    """Set ``policy.<parameter>`` in the config file at ``path``, which must still load afterwards."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the Switchyard config {path}: {exc.strerror}") from None
    typed = _typed(parameter, value)
    if path.suffix.lower() == ".json":
        document = json.loads(text)
        document.setdefault("policy", {})[parameter] = typed
        new = json.dumps(document, indent=2) + "\n"
    else:
        import tomlkit

        toml = tomlkit.parse(text)
        policy = toml.get("policy")
        if policy is None:
            raise ConfigError(f"{path} has no [policy] table to calibrate")
        policy[parameter] = typed
        new = tomlkit.dumps(toml)
    write_atomic(path, new, mode=path.stat().st_mode & 0o777)
    load_config(path)  # what was written must still be a valid config


def _typed(parameter: str, value: str) -> str | float:
    # A share stays a fraction as written ("1/4"); a threshold is a number.
    return value if parameter == "large_share" else float(value)
