"""The Nodes panel: the node list, pairing, unpairing, renaming and deploy progress."""
