#!/usr/bin/env bash
# The device check: on a GPU machine (or, for the test suite, on the CPU with the same steps),
#   1. finds the cached llama-server for this machine's flavour, or builds it (CUDA: for this GPU's
#      architecture only, on every core, to stay in the time budget);
#   2. starts SparkSync's agent for this computer and, under it, llama-server with a small random
#      model this script writes;
#   3. prints the GPU readings the agent reports (utilisation, temperature, power, per-process
#      memory; "unsupported" where NVML gives none), the live tokens/s the agent samples during one
#      long answer against the server's own figure, and SparkSync's decode bound for this GPU.
# It exits non-zero when live tokens/s does not follow the answer (most samples > 0, mean within
# 20 % of the server's figure). The whole run stays under GPU_CHECK_BUDGET_S (default 450 s).
#
#   tests/device/gpu_check.sh                      # cuda where nvcc and the driver exist, else cpu
#   GPU_CHECK_FLAVOUR=cpu tests/device/gpu_check.sh
#
# Offline machines: put the llama-cpp-python sdist at .whl/llama_cpp_python-<version>.tar.gz (or
# name it in SPARKSYNC_LLAMA_SDIST) and any missing Python wheels in .whl/ (see docs/workloads.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
budget="${GPU_CHECK_BUDGET_S:-450}"
started=$(date +%s)
python="${PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x "$here/.venv/bin/python" ]; then python="$here/.venv/bin/python"; else python=python3; fi
fi
# A machine without the project's venv runs it from the source tree, with carried wheels if any.
if ! "$python" -c "import sparksync, sparksync_agent" 2>/dev/null; then
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu-check-site .whl/*.whl
    export PYTHONPATH="/tmp/gpu-check-site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  export PYTHONPATH="$here:$here/agent${PYTHONPATH:+:$PYTHONPATH}"
fi
flavour="${GPU_CHECK_FLAVOUR:-}"
if [ -z "$flavour" ]; then
  if command -v nvcc >/dev/null && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    flavour=cuda
  else
    flavour=cpu
  fi
fi
echo "gpu_check: flavour $flavour, python $python"
if [ "$flavour" = cuda ] && [ -z "${SPARKSYNC_CUDA_ARCHITECTURES:-}" ]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [ -n "$cap" ] && export SPARKSYNC_CUDA_ARCHITECTURES="$cap"  # this GPU only: minutes, not tens
fi
if ! "$python" -m sparksync.core.engines.llamacpp_build --flavour "$flavour" --check >/dev/null 2>&1; then
  sdist="${SPARKSYNC_LLAMA_SDIST:-$(ls .whl/llama_cpp_python-*.tar.gz 2>/dev/null | head -1 || true)}"
  echo "gpu_check: building llama.cpp ($flavour${SPARKSYNC_CUDA_ARCHITECTURES:+, sm_$SPARKSYNC_CUDA_ARCHITECTURES})"
  timeout "$budget" "$python" -m sparksync.core.engines.llamacpp_build --flavour "$flavour" \
    --jobs "$(nproc)" ${sdist:+--sdist "$sdist"} --log-file /tmp/gpu-check-build.log \
    || { echo "gpu_check: the build failed; its log:"; tail -40 /tmp/gpu-check-build.log; exit 3; }
fi
left=$(( budget - ($(date +%s) - started) ))
[ "$left" -gt 60 ] || { echo "gpu_check: only ${left}s left after the build"; exit 4; }
exec timeout "$left" "$python" "$here/tests/device/gpu_check.py" --flavour "$flavour" "$@"
