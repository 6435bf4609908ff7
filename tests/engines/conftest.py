"""Fixtures for real-engine tests: the cached llama.cpp build and tiny local models.

The build takes minutes, so a test never starts it: ``make engines`` (or
``packaging/engines/build-llama-cpp.sh``) fills the cache first, and without
it the engine tests skip with the command to run.
"""

from __future__ import annotations

import pytest

from sparksync.core.engines.llamacpp_build import LlamaCppBinaries, find_binaries, install_dir
from tests.engines.tinymodel import LARGE, SMALL, TinyModel, train_tokenizer, write_tiny_model


@pytest.fixture(scope="session")
def llama_binaries() -> LlamaCppBinaries:
    # The tests run on the CPU even where nvcc exists, so ask for that flavour.
    found = find_binaries("cpu")
    if found is None:
        pytest.skip(f"llama.cpp is not built (no {install_dir('cpu')}/bin); "
                    "run `make engines` or packaging/engines/build-llama-cpp.sh (about 6 minutes)")
    return found


@pytest.fixture(scope="session")
def _tiny_models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def _tiny_tokenizer():
    return train_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(_tiny_models_dir, _tiny_tokenizer) -> TinyModel:
    """64-dim, 2-layer random llama (~1 MB): thousands of tokens/s on 2 cores."""
    return write_tiny_model(_tiny_models_dir, SMALL, _tiny_tokenizer)


@pytest.fixture(scope="session")
def tiny_model_large(_tiny_models_dir, _tiny_tokenizer) -> TinyModel:
    """512-dim, 8-layer random llama (~100 MB): measurably slower than ``tiny_model``."""
    return write_tiny_model(_tiny_models_dir, LARGE, _tiny_tokenizer)
