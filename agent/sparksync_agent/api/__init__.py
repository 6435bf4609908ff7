"""The agent's HTTP API (FastAPI on 127.0.0.1, behind a bearer token)."""
