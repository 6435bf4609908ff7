"""The Planner tab: will a model fit on the cluster, and how fast can it go (sparksync.core.planner)."""
