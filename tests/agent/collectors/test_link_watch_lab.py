"""The kernel's link and address news, in a network namespace of its own (root)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.lab

_SCRIPT = textwrap.dedent("""
    import subprocess, time
    from sparksync_agent.collectors.network import LinkWatch, NetworkCollector

    def news(watch):
        deadline = time.monotonic() + 5
        while not watch.changed():
            assert time.monotonic() < deadline, "no news from the kernel"
            time.sleep(0.05)

    watch = LinkWatch()
    assert watch.available
    assert not watch.changed()  # a fresh namespace: nothing happened yet
    collector = NetworkCollector(link_watch=LinkWatch())
    assert [s.is_up for s in collector.sample(0.0) if s.name == "lo"] == [False]
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    news(watch)
    assert not watch.changed()  # drained
    deadline = time.monotonic() + 5
    while not [s.is_up for s in collector.sample(time.monotonic()) if s.name == "lo"][0]:
        assert time.monotonic() < deadline, "the collector did not re-read lo after the kernel's news"
        time.sleep(0.2)
    subprocess.run(["ip", "addr", "add", "10.77.0.1/24", "dev", "lo"], check=True)
    news(watch)
    watch.close()
    collector.close()
    print("ok")
""")


@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("ip") is None, reason="needs unshare and ip")
def test_the_watch_hears_a_link_going_up_and_an_address_added():
    # Its own network namespace, and /sys mounted again inside it so /sys/class/net is that namespace's.
    inner = 'mount -t sysfs sysfs /sys && exec "$0" -c "$1"'
    argv = ["unshare", "--net", "--mount", "sh", "-c", inner, sys.executable, _SCRIPT]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
