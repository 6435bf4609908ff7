"""Reaching an agent: the HTTP client, its answers and streams, and the local agent.

- ``client``: ``AgentClient``, blocking calls to one agent's API (token in a header only);
- ``answers``: turning the agent's HTTP answers into models or the client's errors;
- ``stream``: the telemetry stream with resume by sequence number;
- ``local``: the agent for "this computer", run by the client on loopback;
- ``handles``: the nodes a command or a window talks to.
"""
