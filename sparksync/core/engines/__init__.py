"""Inference engines SparkSync builds for this computer and its nodes, and the tiny models it writes (no Qt).

- ``llamacpp_build``: llama.cpp's llama-server and rpc-server, built once into the engine cache
  (whose folders this computer's agent has on its PATH);
- ``tiny_model``: tiny random llama GGUFs with the ``gguf`` package: the demo model, and the tests'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.engines.llamacpp_build import (
        LLAMA_CPP_PYTHON_VERSION,
        EngineBuildError,
        LlamaCppBinaries,
        bin_dirs,
        default_flavour,
        ensure_built,
        find_binaries,
        install_dir,
    )
    from sparksync.core.engines.tiny_model import (
        DEMO,
        ModelShape,
        Vocabulary,
        byte_vocabulary,
        demo_model_path,
        write_demo_model,
        write_gguf,
    )

# name -> the module that holds it
_WHERE = {
    "LLAMA_CPP_PYTHON_VERSION": "llamacpp_build",
    "EngineBuildError": "llamacpp_build",
    "LlamaCppBinaries": "llamacpp_build",
    "bin_dirs": "llamacpp_build",
    "default_flavour": "llamacpp_build",
    "ensure_built": "llamacpp_build",
    "find_binaries": "llamacpp_build",
    "install_dir": "llamacpp_build",
    "DEMO": "tiny_model",
    "ModelShape": "tiny_model",
    "Vocabulary": "tiny_model",
    "byte_vocabulary": "tiny_model",
    "demo_model_path": "tiny_model",
    "write_demo_model": "tiny_model",
    "write_gguf": "tiny_model",
}
__all__ = [
    "DEMO",
    "EngineBuildError",
    "LLAMA_CPP_PYTHON_VERSION",
    "LlamaCppBinaries",
    "ModelShape",
    "Vocabulary",
    "bin_dirs",
    "byte_vocabulary",
    "default_flavour",
    "demo_model_path",
    "ensure_built",
    "find_binaries",
    "install_dir",
    "write_demo_model",
    "write_gguf",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
