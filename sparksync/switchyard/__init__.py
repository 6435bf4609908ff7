"""Switchyard: an OpenAI-compatible gateway that routes each request to a small or a large model pool.

The pieces, each in its own module:

- ``config``: the config file (TOML or JSON) as pydantic models;
- ``pools`` / ``breaker`` / ``health`` / ``sources``: replicas, balancing and their health;
- ``policies``: rules, cascade and fixed share;
- ``gateway`` / ``relay`` / ``upstream``: the ASGI app and the proxying;
- ``metrics``: Prometheus figures; ``explain``: why a request goes where it goes;
- ``eval``: the case-file format, scoring, runner and report.
"""
