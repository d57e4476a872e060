#!/usr/bin/env bash
# The verifier on a GPU machine, in under five minutes: its CUDA tests
# (pytest -m cuda: float32/float64 runs on CUDA; bf16 and fp16 autocast, fp16
# with a GradScaler, clipping after and before unscale_, a constant factor
# under bf16) and one command-line run. Run from anywhere, with the verify and
# test extras installed; PYTHON picks the interpreter (default: python).
#
# Exit status: 0 when every check passed; that of the first failing check
# otherwise (124 when it ran out of its time). Without a CUDA device it says
# so and exits 0 (SKIPPED), or 1 when GPU_CHECK_REQUIRE=1 (a GPU CI job that
# must not pass on a machine without one).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PYTHON="${PYTHON:-python}"

"$PYTHON" - <<'PY'
import sys
try:
    import torch
except ImportError:
    print("gpu_check: torch is not importable; install the verify extra (pip install -e '.[verify,test]')")
    sys.exit(2)
if not torch.cuda.is_available():
    print(f"gpu_check: SKIPPED: no CUDA device on this machine (torch {torch.__version__}, "
          f"built with CUDA {torch.version.cuda or 'none'})")
    sys.exit(3)
print(f"gpu_check: torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
PY
probe=$?
if [ "$probe" -eq 3 ]; then
    [ "${GPU_CHECK_REQUIRE:-0}" = "1" ] && exit 1
    exit 0
fi
[ "$probe" -eq 0 ] || exit "$probe"

run() {
    local limit=$1 label=$2
    shift 2
    echo "gpu_check: $label"
    timeout "$limit" "$@"
    local status=$?
    if [ "$status" -ne 0 ]; then
        [ "$status" -eq 124 ] && echo "gpu_check: FAILED: $label ran past ${limit}s" || echo "gpu_check: FAILED: $label (exit $status)"
        exit "$status"
    fi
}

run 220 "CUDA tests" "$PYTHON" -m pytest -q -p no:cacheprovider -m cuda tests/test_verify.py tests/test_verify_cuda.py
run 60 "command line on CUDA" "$PYTHON" -m accumlint.cli verify fixtures/verify/correct_gated.py::train --device cuda --dtype float32
echo "gpu_check: OK"
