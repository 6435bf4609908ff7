"""The nodes of the cluster: who they are, and what a user does to them.

- ``registry``: paired nodes and their pinned host keys (a versioned file, written atomically);
- ``rows``: one row per machine for the node list (discovered, paired, their states);
- ``actions`` / ``cluster_actions``: rename, and the quick actions on one node or all;
- ``pairing_session``: a pairing's steps for a face (dialog or CLI) to drive.
"""
