"""Pure edits of an ``authorized_keys`` file: add our key once, remove only our key.

Files are handled as bytes and split on ``\\n`` only, so every line we do not
own (comments, other keys, odd encodings, CRLF endings, a last line with no
newline) comes back byte for byte. A key is recognised by its blob (type and
base64), wherever it sits in the line: after options such as
``from="..." `` or ``restrict``, and whatever its comment says.
"""

from __future__ import annotations

import base64
import binascii
import re

# Key types start with one of these; no authorized_keys option does.
_KEY_TYPE = re.compile(r"^(?:ssh|ecdsa|sk)-[A-Za-z0-9@.+-]+$")


def key_blob(line: str) -> bytes | None:
    """The decoded public key blob of an authorized_keys (or ``.pub``) line; None if it has none."""
    fields = _key_fields(line.strip())
    if fields is None:
        return None
    try:
        return base64.b64decode(fields[1], validate=True)
    except (binascii.Error, ValueError):
        return None


def has_key(content: bytes, blob: bytes) -> bool:
    return any(_line_blob(line) == blob for line in split_lines(content))


def add_key(content: bytes, key_line: str) -> bytes:
    """``content`` with ``key_line`` appended, unless that key is already there (in any form)."""
    blob = _required_blob(key_line)
    if has_key(content, blob):
        return content
    # A last line with no newline would otherwise be glued to ours.
    separator = b"\n" if content and not content.endswith(b"\n") else b""
    return content + separator + key_line.strip().encode() + b"\n"


def remove_key(content: bytes, key_line: str) -> bytes:
    """``content`` without the lines that hold ``key_line``'s key; every other byte kept."""
    blob = _required_blob(key_line)
    return b"".join(line for line in split_lines(content) if _line_blob(line) != blob)


def count_key(content: bytes, key_line: str) -> int:
    blob = _required_blob(key_line)
    return sum(_line_blob(line) == blob for line in split_lines(content))


def split_lines(content: bytes) -> list[bytes]:
    """Lines with their ``\\n`` kept; the last one may lack it. ``b"".join`` restores ``content``."""
    parts = content.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines


def _required_blob(key_line: str) -> bytes:
    blob = key_blob(key_line)
    if blob is None:
        raise ValueError(f"not a public key line: {key_line[:40]!r}")
    return blob


def _line_blob(line: bytes) -> bytes | None:
    # latin-1 maps every byte to one character, so no line can fail to decode.
    return key_blob(line.decode("latin-1"))


def _key_fields(text: str) -> list[str] | None:
    if not text or text.startswith("#"):
        return None
    fields = text.split()
    if not _KEY_TYPE.match(fields[0]):
        fields = _skip_options(text).split()
    if len(fields) >= 2 and _KEY_TYPE.match(fields[0]):
        return fields
    return None


def _skip_options(text: str) -> str:
    """The rest of the line after the options field, which may hold blanks inside quotes."""
    quoted = escaped = False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char in " \t" and not quoted:
            return text[index:]
    return ""
