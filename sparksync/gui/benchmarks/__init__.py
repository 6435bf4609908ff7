"""The Benchmarks tab: stored runs, their details, scaling charts, comparisons, exports, and new runs."""
