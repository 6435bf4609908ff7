"""The real-engine fixtures for the benchmark checks that live here.

``llama_binaries`` and ``tiny_model`` are the ones in tests/engines/conftest.py,
imported so the real-engine checks sit beside the code they check. The fake
server and tokenizer fixtures come from tests/core/bench/fixtures.py, which
the root conftest registers for every test directory (tests/cli uses them).
"""

from __future__ import annotations

from tests.engines.conftest import _tiny_models_dir, _tiny_tokenizer, llama_binaries, tiny_model  # noqa: F401
