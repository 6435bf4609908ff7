"""Signals for a rank's whole process tree: its group, plus descendants that left the group."""

from __future__ import annotations

import os
import signal

import psutil


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def signal_tree(leader: int, sig: signal.Signals) -> int:
    """Signal the group led by ``leader`` and every descendant of it; how many were signalled."""
    tree = descendants(leader)
    signal_group(leader, sig)
    for proc in tree:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass
    return len(tree)


def kill_tree(leader: int) -> None:
    """SIGKILL every descendant (sweeping again in case one forked meanwhile), then the leader."""
    for _ in range(5):
        if signal_tree(leader, signal.SIGKILL) == 0:
            break
    try:
        os.kill(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
