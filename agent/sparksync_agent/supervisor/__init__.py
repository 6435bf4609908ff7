"""The agent's process supervisor: workload ranks, their logs, readiness, restarts and tokens/s.

How a rank runs (and why it survives an agent restart)::

    agent ──spawns──▶ keeper (own session + process group, a child subreaper)
                        └─▶ the rank's command (same group) ─▶ its children...
                              stdout+stderr ──pipe──▶ keeper ──▶ rotating log file

The keeper (``keeper.py``) is a small process per rank that owns everything
the agent would lose if it died: the pipe the command writes to, the log
rotation, the command's exit status (written to a file) and the clean-up of
stray descendants. The agent only reads the log file and the status file, so
a new agent re-attaches to a running rank by reading the same files; nothing
is started twice.

Keepers are forked from a *spare* keeper that the agent starts in advance,
with its imports done (``spare.py``), so a rank's command runs milliseconds
after the request; when no spare is ready, a fresh
``python -m sparksync_agent.supervisor.keeper`` does the same job, slower.

This package's ``__init__`` imports nothing: a keeper must not pay for the
agent's imports. The agent uses ``supervisor.supervisor.Supervisor``.
"""
