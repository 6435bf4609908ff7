"""The dashboard's Switchyard section over real local gateways (real HTTP, scripted replicas)."""

from __future__ import annotations

import httpx
import pytest

from sparksync.switchyard.announce import announced
from sparksync.switchyard.gateway_watch import GatewayWatch
from sparksync.switchyard.watched import load_watched
from tests.switchyard.conftest import _servers, config_for, dead_url, fake, gateway  # noqa: F401

pytestmark = pytest.mark.gui


@pytest.fixture
def section(qtbot):
    from sparksync.gui.switchyard.switchyard_view import SwitchyardView

    watch = GatewayWatch(records=list)  # this computer's announcements and the watched URLs
    view = SwitchyardView(watch, poll_ms=200)
    qtbot.addWidget(view)
    view.resize(1100, 320)
    view.show()
    yield view
    assert view.shutdown(15)
    watch.close()


def ask(url: str, pool: str, times: int) -> None:
    body = {"model": "switchyard", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.Client(timeout=30) as client:
        for _ in range(times):
            response = client.post(
                f"{url}/v1/chat/completions", json=body, headers={"X-Switchyard-Pool": pool}
            )
            assert response.status_code == 200


def test_no_gateway_shows_only_the_hint(qtbot, section):
    with qtbot.waitSignal(section.readings_shown, timeout=15_000) as shown:
        section.start()
    assert shown.args == [[]]
    assert section.panels == {} and "sparksync switchyard serve" in section.hint.text()
    assert not section.problems.isVisible()


def test_a_local_gateway_shows_its_split_and_tokens(qtbot, section, fake, gateway):  # noqa: F811
    config = config_for([fake("s1").url, fake("s2").url], [fake("l1").url])
    gw = gateway(config)
    with announced(config, gw.url):  # as `sparksync switchyard serve` does once it listens
        section.start()
        qtbot.waitUntil(lambda: len(section.panels) == 1, timeout=15_000)
        ask(gw.url, "small", 3)
        ask(gw.url, "large", 1)
        (panel,) = section.panels.values()
        qtbot.waitUntil(lambda: panel.split.text() == "small 75% | large 25%", timeout=15_000)
        qtbot.waitUntil(lambda: (panel.latest_rate("large") or 0) > 0, timeout=15_000)
        assert (panel.latest_rate("small") or 0) > 0
        assert gw.url in panel.title.text() and "this computer" in panel.title.text()
        figures = panel.figures.text()
        assert "small" in figures and "2/2" in figures and "1/1" in figures
        assert "TTFT p50" in figures and " ms" in figures
    # The gateway stopped announcing itself: its panel goes and the hint comes back.
    qtbot.waitUntil(lambda: section.panels == {}, timeout=15_000)
    assert "no gateway is running" in section.hint.text()


def test_an_unreachable_watched_gateway_says_why(qtbot, section):
    section.address.setText(dead_url() + "/v1")
    errors = []
    section.error_raised.connect(errors.append)
    section.start()
    section.add_button.click()
    qtbot.waitUntil(lambda: len(section.panels) == 1, timeout=15_000)
    (panel,) = section.panels.values()
    qtbot.waitUntil(lambda: "does not answer" in panel.problem.text(), timeout=15_000)
    assert len(load_watched()) == 1 and section.address.text() == ""
    qtbot.waitUntil(lambda: any("does not answer" in e for e in errors), timeout=15_000)
    # Told to the status bar once, not at every poll.
    polls = []
    section.readings_shown.connect(polls.append)
    qtbot.waitUntil(lambda: len(polls) >= 3, timeout=15_000)
    assert len([e for e in errors if "does not answer" in e]) == 1


def test_the_main_window_dashboard_shows_a_local_gateway(qtbot, window, fake, gateway):  # noqa: F811
    config = config_for([fake("s").url], [fake("l").url])
    gw = gateway(config)
    with announced(config, gw.url):
        ask(gw.url, "large", 2)
        window.start()
        qtbot.waitUntil(lambda: len(window.switchyard.panels) == 1, timeout=30_000)
        (panel,) = window.switchyard.panels.values()
        qtbot.waitUntil(lambda: panel.split.text() == "small 0% | large 100%", timeout=30_000)
        assert window.tabs.indexOf(window.switchyard) >= 0  # the Switchyard tab
