"""A small local stand-in for the Hugging Face hub, serving repos the tests fill.

It answers the calls huggingface_hub's ``snapshot_download`` makes: the repo's
revision info, its file tree, and each file's HEAD and GET under
``/{repo}/resolve/{revision}/{path}`` (with Range, so a cut download resumes).
No hub is reachable from the test machines; this one listens on loopback or
inside a lab namespace. It records the Authorization headers it saw, so a test
can tell that the token arrived.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Repo:
    files: dict[str, bytes]
    private_token: str | None = None  # when set, only this bearer token may read the repo


@dataclass
class HubServer:
    repos: dict[str, Repo] = field(default_factory=dict)
    seen_auth: list[str] = field(default_factory=list)
    bytes_per_chunk_delay: float = 0.0
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def add_folder(self, repo: str, folder: Path, token: str | None = None) -> None:
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        self.repos[repo] = Repo(files, token)

    def start(self, sock: socket.socket | None = None) -> str:
        """Serve on ``sock`` (bound already, e.g. inside a namespace) or on a free loopback port."""
        hub = self

        class Handler(_Handler):
            server_hub = hub

        if sock is None:
            self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        else:
            self._server = ThreadingHTTPServer(sock.getsockname()[:2], Handler, bind_and_activate=False)
            self._server.socket.close()
            self._server.socket = sock
            sock.listen(16)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="hub-server", daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    server_hub: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _repo(self, name: str) -> Repo | None:
        self.server_hub.seen_auth.append(self.headers.get("Authorization", ""))
        repo = self.server_hub.repos.get(name)
        if repo is None:
            return None
        if repo.private_token and self.headers.get("Authorization") != f"Bearer {repo.private_token}":
            return None
        return repo

    def _json(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _missing(self) -> None:
        self.send_response(404)
        self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Type", "application/json")
        data = b'{"error":"Repository not found"}'
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def _answer(self, head: bool) -> None:
        path = unquote(urlparse(self.path).path)
        info = re.match(r"^/api/models/(.+?)/revision/([^/]+)$", path)
        tree = re.match(r"^/api/models/(.+?)/tree/([^/]+)(/.*)?$", path)
        resolve = re.match(r"^/(.+?)/resolve/([^/]+)/(.+)$", path)
        if info:
            repo = self._repo(info.group(1))
            if repo is None:
                return self._missing()
            siblings = [{"rfilename": name} for name in repo.files]
            return self._json(200, {"id": info.group(1), "modelId": info.group(1), "sha": COMMIT,
                                    "siblings": siblings, "private": bool(repo.private_token)})
        if tree:
            repo = self._repo(tree.group(1))
            if repo is None:
                return self._missing()
            entries = []
            for name, data in repo.files.items():
                sha256 = hashlib.sha256(data).hexdigest()
                entry = {"type": "file", "path": name, "size": len(data),
                         "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
                if len(data) > 1024:
                    entry["lfs"] = {"oid": sha256, "size": len(data), "pointerSize": 134}
                entries.append(entry)
            return self._json(200, entries)
        if resolve:
            repo = self._repo(resolve.group(1))
            if repo is None or resolve.group(3) not in repo.files:
                return self._missing()
            data = repo.files[resolve.group(3)]
            etag = hashlib.sha256(data).hexdigest() if len(data) > 1024 else hashlib.sha1(data).hexdigest()
            start = 0
            ranged = re.match(r"bytes=(\d+)-", self.headers.get("Range", ""))
            if ranged and not head:
                start = int(ranged.group(1))
            body = data[start:]
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{etag}"')
            self.send_header("Content-Length", str(len(body) if not head else len(data)))
            self.send_header("Accept-Ranges", "bytes")
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if not head:
                self.wfile.write(body)
            return None
        return self._missing()
