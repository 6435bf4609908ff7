#!/usr/bin/env bash
# Builds llama.cpp's llama-server and rpc-server into the engine cache, once.
# The real work (pinned source, cache key, atomic install) lives in
# sparksync/core/engines/llamacpp_build.py so `sparksync engine install` shares it.
#
#   packaging/engines/build-llama-cpp.sh [--flavour cpu|cuda] [--jobs N] [--check]
#
# The flavour defaults to cpu (what the test suite runs); the cache location
# follows SPARKSYNC_ENGINE_CACHE, else /var/cache/sparksync as root, else the
# user's cache dir. Compiler output goes to the terminal unless --log-file is given.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${PYTHON:-$here/.venv/bin/python}"
[ -x "$python" ] || python=python3
args=("$@")
case " ${args[*]-} " in
  *" --flavour"*) ;;
  *) args+=(--flavour "${SPARKSYNC_ENGINE_FLAVOUR:-cpu}") ;;
esac
cd "$here"
exec "$python" -m sparksync.core.engines.llamacpp_build --jobs "${JOBS:-2}" "${args[@]}"
