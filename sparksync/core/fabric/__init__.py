"""The cluster's CX-7 fabric: its links, node-to-node SSH over it, and its acceptance check."""
