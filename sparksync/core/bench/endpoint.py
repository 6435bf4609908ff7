"""Small, read-only probes of an OpenAI-style endpoint, made before a benchmark.

They use only what such servers share (``/v1/models``, a one-token chat
completion and its ``usage``), plus llama.cpp's ``/props`` where it exists,
so the same checks work on llama-server, vLLM, SGLang and TRT-LLM.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit


from sparksync.core.bench.errors import BenchInputError, EndpointUnreachableError, ModelNotServedError

if TYPE_CHECKING:  # httpx loads with the first probe: the Benchmarks panel opens without it
    import httpx

PROBE_TIMEOUT_S = 10.0
# A one-token answer on a large prompt still prefills it; give the server time.
COUNT_TIMEOUT_S = 120.0


def normalize_base_url(url: str) -> str:
    """``http://host:port`` or ``.../v1`` -> ``http://host:port/v1`` (what llama-benchy expects)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BenchInputError(f"{url!r} is not an http(s) URL; give the endpoint as http://HOST:PORT/v1")
    path = parts.path.rstrip("/") or "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True)
class Endpoint:
    """Where the model is served; the key never appears in a repr or a log."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, url: str, api_key: str | None = None) -> Endpoint:
        return cls(normalize_base_url(url), api_key or None)

    @property
    def server_root(self) -> str:
        """The server's root (llama.cpp's /props lives there, not under /v1)."""
        parts = urlsplit(self.base_url)
        root = parts.path.rsplit("/v1", 1)[0] if parts.path.endswith("/v1") else parts.path
        return urlunsplit((parts.scheme, parts.netloc, root, "", ""))


class EndpointProbe:
    """The HTTP calls the preflight needs, each turned into a clear error."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        import httpx

        self._http = httpx.Client(headers=headers, timeout=PROBE_TIMEOUT_S)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EndpointProbe:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def models(self) -> list[dict[str, Any]]:
        body = self._get(self.endpoint.base_url + "/models")
        entries = body.get("data") if isinstance(body, dict) else None
        if not isinstance(entries, list):
            raise EndpointUnreachableError(
                f"{self.endpoint.base_url}/models did not list models the OpenAI way; "
                "check that the URL is the server's OpenAI API (usually ending in /v1)")
        return [e for e in entries if isinstance(e, dict)]

    def props(self) -> dict[str, Any] | None:
        """llama.cpp's /props, or None on servers without it."""
        import httpx

        try:
            response = self._http.get(self.endpoint.server_root + "/props")
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        try:
            body = response.json()
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def prompt_tokens(self, model: str, text: str) -> int | None:
        """The server's own count of a one-message chat prompt (None when it reports no usage)."""
        payload = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 1,
                   "stream": False}
        body = self._post(self.endpoint.base_url + "/chat/completions", payload)
        usage = body.get("usage") if isinstance(body, dict) else None
        count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return count if isinstance(count, int) else None

    def closes_after_stream(self, model: str) -> bool:
        """Whether the server drops a kept-alive connection after a streamed reply.

        llama.cpp's server (the version SparkSync builds) ends every stream by
        closing the connection while announcing keep-alive, so a client that
        reuses connections, as llama-benchy's aiohttp session does, fails
        the next request whenever it is quick enough to reuse the dead one.
        Two one-token streams on one http.client connection show it: the
        second fails when the server closed the first. (httpx would hide it
        by reconnecting.)
        """
        parts = urlsplit(self.endpoint.base_url)
        if not parts.hostname:  # normalize_base_url refuses such a URL
            return False
        https = parts.scheme == "https"
        connection_class = http.client.HTTPSConnection if https else http.client.HTTPConnection
        connection = connection_class(parts.hostname, parts.port, timeout=PROBE_TIMEOUT_S)
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": "."}], "max_tokens": 1,
                           "stream": True})
        headers = {"Content-Type": "application/json"}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        try:
            for _ in range(2):
                connection.request("POST", parts.path + "/chat/completions", body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                if response.will_close:
                    return True
            return False
        except (http.client.HTTPException, ConnectionError):
            return True
        except OSError:
            return False  # a timeout or the like: not this problem, and the benchmark will tell
        finally:
            connection.close()

    def _get(self, url: str) -> Any:
        return self._checked(lambda: self._http.get(url), url)

    def _post(self, url: str, payload: dict) -> Any:
        return self._checked(lambda: self._http.post(url, json=payload, timeout=COUNT_TIMEOUT_S), url)

    def _checked(self, send, url: str) -> Any:
        import httpx

        try:
            response = send()
        except httpx.TimeoutException:
            raise EndpointUnreachableError(
                f"{url} did not answer in time; check that the server is up and not stuck") from None
        except httpx.TransportError as exc:
            raise EndpointUnreachableError(
                f"nothing answers at {self.endpoint.base_url} ({_reason(exc)}); start the model's server, "
                "or check the address and port (and the SSH tunnel, if it goes through one)") from None
        _raise_for_status(response, url)
        try:
            return response.json()
        except ValueError:
            raise EndpointUnreachableError(
                f"{url} answered with something that is not JSON; is this the server's OpenAI API?") from None


def _raise_for_status(response: httpx.Response, url: str) -> None:
    if response.status_code in (401, 403):
        raise EndpointUnreachableError(
            f"{url} refused the request (HTTP {response.status_code}); give the endpoint's API key "
            "(--api-key or $SPARKSYNC_BENCH_API_KEY)")
    if response.status_code == 404 and url.endswith("/chat/completions"):
        raise ModelNotServedError(f"{url} answered 404: the server has no chat completions for this model; "
                                  "check --model against the served names")
    if response.status_code >= 400:
        raise EndpointUnreachableError(
            f"{url} answered HTTP {response.status_code}: {response.text[:300].strip()}; "
            "check the server's log")


def _reason(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    return "connection refused" if "refused" in text.lower() else text
