"""Workloads, client side: recipes, placement plans, the fabric and the exact launch per rank.

Nothing here starts a process: it turns a recipe and a plan into one
``RankLaunch`` per process (``launch_spec.py``), which each node's agent
will run. No Qt.
"""
