"""Deploy events as one progress bar per node."""

from __future__ import annotations

import pytest

from sparksync.core.deploy.model import DeployResult, Outcome, ProgressEvent, Stage
from sparksync.core.deploy.feed import STAGE_SPANS, DeployFeed, finished, to_progress


def test_stages_fill_the_bar_in_order():
    order = [Stage.CHECKING, Stage.UPLOADING, Stage.INSTALLING, Stage.STARTING, Stage.HEALTH, Stage.DONE]
    fractions = [to_progress(ProgressEvent("n1", s, f)).fraction for s in order for f in (0.0, 0.5, 1.0)]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert set(STAGE_SPANS) == set(Stage)  # a new stage needs a place on the bar
    step = to_progress(ProgressEvent("n1", Stage.UPLOADING, 0.5, "12 MB of 24 MB"))
    assert step.fraction == pytest.approx(0.275) and step.stage == "uploading the agent: 12 MB of 24 MB"


def test_the_feed_reaches_every_listener_until_it_unsubscribes():
    feed, seen = DeployFeed(), []
    stop = feed.add_listener(seen.append)
    feed.on_event(ProgressEvent("n1", Stage.CHECKING, 1.0))
    feed.publish(finished(DeployResult("n1", Outcome.FAILED, None, None, 1.0, "no space left")))
    stop()
    feed.on_event(ProgressEvent("n1", Stage.CHECKING, 1.0))
    assert [(s.fraction, s.done, s.error) for s in seen] == [(0.1, False, None), (1.0, True, "no space left")]


def test_the_summary_says_how_many_nodes_run_the_agent_and_why_the_others_do_not():
    from sparksync.core.deploy.feed import summary_text

    results = [
        DeployResult("n1", Outcome.DEPLOYED, "0.2.0", "supervised", 3.0),
        DeployResult("n2", Outcome.UNCHANGED, "0.2.0", "systemd-user", 1.0),
        DeployResult(
            "n3", Outcome.FAILED, None, None, 2.0, "No space left on the node (12 MB free, 80 MB needed)."
        ),
    ]
    assert summary_text(results) == (
        "2 of 3 node(s) run the agent 0.2.0.\n"
        "n3: failed — No space left on the node (12 MB free, 80 MB needed)."
    )
    assert summary_text([]) == "Nothing was deployed."
