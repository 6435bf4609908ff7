"""The prompt text llama-benchy cuts its prompts from, served on loopback.

llama-benchy reads its text from a URL (``--book-url``). SparkSync ships an
original text (``data/prompt.txt``) and lets the user choose another local
file; either is served from 127.0.0.1 for the duration of one run, so
nothing is fetched from outside.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from sparksync.core.bench.errors import BenchInputError

if TYPE_CHECKING:  # http.server loads with the first run, not with the Benchmarks panel
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)

DEFAULT_PROMPT_FILE = Path(__file__).parent / "data" / "prompt.txt"
MIN_PROMPT_WORDS = 50


def read_prompt_text(path: Path) -> str:
    """The file's text, or a BenchInputError saying what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BenchInputError(f"prompt file {path} does not exist; give an existing text file") from None
    except UnicodeDecodeError:
        raise BenchInputError(f"prompt file {path} is not UTF-8 text; give a plain text file") from None
    except OSError as exc:
        raise BenchInputError(f"cannot read prompt file {path}: {exc.strerror}") from None
    if len(text.split()) < MIN_PROMPT_WORDS:
        raise BenchInputError(f"prompt file {path} has fewer than {MIN_PROMPT_WORDS} words; "
                              "give a longer text (llama-benchy repeats it to fill each prompt)")
    return text


class PromptServer:
    """Serves one text at ``url`` on 127.0.0.1 while the ``with`` block runs."""

    def __init__(self, text: str):
        self._body = text.encode("utf-8")
        self._path = f"/prompt-{hashlib.sha256(self._body).hexdigest()[:16]}.txt"
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the prompt server is not running")
        return f"http://127.0.0.1:{self._server.server_port}{self._path}"

    def __enter__(self) -> PromptServer:
        from http.server import ThreadingHTTPServer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="bench-prompt-server",
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._server = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        from http import HTTPStatus
        from http.server import BaseHTTPRequestHandler

        body, path = self._body, self._path

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                if self.path != path:
                    self.send_error(HTTPStatus.NOT_FOUND)
                    return
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt: str, *args) -> None:
                log.debug("prompt server: " + fmt, *args)

        return Handler
