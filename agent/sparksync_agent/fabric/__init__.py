"""The node's ConnectX-7 fabric: what its ports are and see, and the root helper that configures them.

- ``ports``: the CX-7 netdevs under a sysfs root (``/sys`` on a node, a fake
  tree in unit tests): carrier, speed, MTU, MAC, addresses, RoCE device;
- ``probe``: which MACs answer an IPv6 all-nodes ping on each carrier-up port;
- ``inspect``: both together, as the ``GET /v1/fabric`` report;
- ``netplan``: the one netplan file SparkSync writes, and its validation;
- ``helper``: the root helper (``python -m sparksync_agent.fabric.helper``),
  run through ``sudo`` by ``sudo``, which applies a plan and rolls it back.
"""
