"""The agent's side of a rank's log: follows output.log across rotations, numbering lines.

The reader keeps the file open, so a rotation (a rename by the keeper) does
not lose lines: it finishes the renamed file through its open descriptor,
then moves on to the new ``output.log``.
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

from sparksync_agent.supervisor.files import LOG_FILE, inode_of, read_marker

MARKER_TRIES = 5


class LogTail:
    def __init__(self, rank_dir: Path):
        self.path = rank_dir / LOG_FILE
        self.rank_dir = rank_dir
        self.next_seq = 1
        self._fh: io.BufferedReader | None = None
        self._ino: int | None = None
        self._partial = b""
        self._closed = False
        self._gap = 0  # lines the last open skipped (rotated away before they were read)
        self._following = False  # True once a file was read: later gaps are rotations we missed

    def close(self) -> None:
        """Stop following (the rank has finished and every line has been read)."""
        self._closed = True
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def read(self) -> list[tuple[int, str]]:
        """New complete lines, with their sequence numbers."""
        if self._closed:
            return []
        lines: list[tuple[int, str]] = []
        if self._fh is not None:
            lines += self._drain()
            if inode_of(self.path) in (None, self._ino):
                return lines
            lines += self._drain()  # the rest of the renamed file, through our descriptor
            self._fh.close()
            self._fh = None
        following = self._following
        if self._open():
            if following and self._gap:
                # More than one rotation since the last read: the lines between are in the backups.
                lines += self._from_backups(self.next_seq - self._gap, self._gap)
            lines += self._drain()
        return lines

    def _open(self) -> bool:
        """Open the current output.log at the line number its marker gives."""
        for _ in range(MARKER_TRIES):
            try:
                fh = open(self.path, "rb")  # noqa: SIM115 - held open across reads on purpose
            except FileNotFoundError:
                return False
            marker, ino = read_marker(self.rank_dir), os.fstat(fh.fileno()).st_ino
            if marker is not None and marker.inode == ino:
                self._fh, self._ino, self._partial, self._following = fh, ino, b"", True
                self._gap = max(0, marker.first_seq - self.next_seq)
                self.next_seq = max(self.next_seq, marker.first_seq)
                return True
            fh.close()
            time.sleep(0.01)  # the keeper writes the marker right after it creates the file
        return False

    def _from_backups(self, first_seq: int, count: int) -> list[tuple[int, str]]:
        """The ``count`` lines before the current file, from output.log.1, .2... (newest first)."""
        texts: list[str] = []
        index = 1
        while len(texts) < count:
            try:
                older = (self.rank_dir / f"{LOG_FILE}.{index}").read_bytes().split(b"\n")[:-1]
            except FileNotFoundError:
                break
            texts = [raw.decode("utf-8", errors="replace") for raw in older] + texts
            index += 1
        texts = texts[-count:] if count else []
        # Whatever was rotated out of the backups too stays missing; the ring counts it as lost.
        start = first_seq + count - len(texts)
        return [(start + i, text) for i, text in enumerate(texts)]

    def _drain(self) -> list[tuple[int, str]]:
        assert self._fh is not None, "drained before a file was open"
        data = self._fh.read()
        if not data:
            return []
        *complete, self._partial = (self._partial + data).split(b"\n")
        first, self.next_seq = self.next_seq, self.next_seq + len(complete)
        return [(first + i, raw.decode("utf-8", errors="replace")) for i, raw in enumerate(complete)]
