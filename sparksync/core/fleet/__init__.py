"""The paired nodes at run time: their states, links to their agents, checks and live telemetry.

- ``state``: ``NodeState`` and its transition table, ``NodeStatus``, ``StateTracker``;
- ``store``: the last known state of each node, kept between runs;
- ``agent_link``: one node's agent through an SSH tunnel (token and endpoint read over SFTP);
- ``fleet``: all nodes' links, parallel checks, state changes to a callback;
- ``follower``: every node's telemetry, resumed after a cut from the last sequence seen;
- ``remote_node``: paired nodes as ``NodeHandle``s for the GUI and the CLI.
"""

# Nothing is imported here: the window imports ``state`` at start-up, and the other modules
# bring paramiko, which the GUI loads only in its workers.
