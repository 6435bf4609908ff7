"""Benchmark test fixtures: tokenizers and a fake OpenAI server.

Registered for the whole suite by the root conftest (``pytest_plugins``), so
tests/core/bench and tests/cli share them.
"""

from __future__ import annotations

import pytest

from tests.core.bench.fake_openai import FakeOpenAI


def train_tokenizer(**kwargs):
    # Imported on use: this module is a plugin of the whole suite, and most tests need no tokenizer.
    from tests.engines.tinymodel import train_tokenizer as train

    return train(**kwargs)


@pytest.fixture(scope="session")
def served_tokenizer():
    """The vocabulary the fake server counts with (the tiny models' own)."""
    return train_tokenizer()


@pytest.fixture(scope="session")
def tokenizer_json(tmp_path_factory, served_tokenizer):
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    served_tokenizer.save(str(path))
    return path


@pytest.fixture(scope="session")
def other_tokenizer_json(tmp_path_factory):
    """A different, smaller vocabulary: it cuts the same text into many more tokens."""
    path = tmp_path_factory.mktemp("other-tokenizer") / "tokenizer.json"
    train_tokenizer(vocab_size=300).save(str(path))
    return path


@pytest.fixture
def fake_server(served_tokenizer):
    with FakeOpenAI(served_tokenizer) as server:
        yield server


@pytest.fixture
def make_fake(served_tokenizer):
    """Start fake servers with chosen settings; all are stopped at teardown."""
    started = []

    def make(**settings) -> FakeOpenAI:
        server = FakeOpenAI(served_tokenizer, **settings).__enter__()
        started.append(server)
        return server

    yield make
    for server in started:
        server.__exit__(None, None, None)


def second_test_began(progress, label: str) -> bool:
    """Whether llama-benchy has begun the test ``label``, so the one before it is recorded; a count of
    finished requests can be reached a moment before llama-benchy records the test they belong to."""
    return (progress.current_test or "").startswith(label)
