"""The prompt text: the shipped file, a user's file, and the loopback server llama-benchy reads."""

from __future__ import annotations

import httpx
import pytest

from sparksync.core.bench.errors import BenchInputError
from sparksync.core.bench.prompt_source import DEFAULT_PROMPT_FILE, PromptServer, read_prompt_text


def test_the_shipped_text_is_long_enough_for_the_published_prompt():
    text = read_prompt_text(DEFAULT_PROMPT_FILE)
    # 8,192 tokens need about 6,000 words; llama-benchy repeats a shorter text, but a few
    # thousand distinct words keep each prompt from being one sentence over and over.
    assert len(text.split()) > 3000


@pytest.mark.parametrize(("content", "message"), [
    (None, "does not exist"),
    (b"\xff\xfe not utf-8 \xff" * 100, "is not UTF-8 text"),
    (b"too short", "fewer than 50 words"),
])
def test_a_bad_prompt_file_is_refused_with_the_reason(tmp_path, content, message):
    path = tmp_path / "prompt.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(BenchInputError, match=message):
        read_prompt_text(path)


def test_the_server_serves_the_text_on_loopback_and_nothing_else():
    text = "Ilse oiled the pulleys every ninth day. " * 20
    with PromptServer(text) as server:
        url = server.url
        assert url.startswith("http://127.0.0.1:")
        answer = httpx.get(url)
        assert answer.status_code == 200 and answer.text == text
        assert httpx.get(url.rsplit("/", 1)[0] + "/etc/passwd").status_code == 404
    with pytest.raises(httpx.ConnectError):
        httpx.get(url)  # stopped with the block
