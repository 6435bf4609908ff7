"""The Models tab: the model × node matrix, fetch, copy, delete, per-node progress."""
