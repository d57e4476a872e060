#!/usr/bin/env bash
# The verifier on a GPU machine, in well under five minutes: its CUDA tests
# (pytest -m cuda: float32/float64 runs on CUDA, AMP bf16 and fp16 autocast with
# a GradScaler) and one command-line run. Run from the repository root with
# the test extra installed. Exit status: pytest's, then the CLI's.
set -euo pipefail
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.cuda.get_device_name(0))"
timeout 240 python -m pytest -q -m cuda tests/test_verify.py tests/test_verify_cuda.py
timeout 60 python -m accumlint.cli verify fixtures/verify/correct_gated.py::train --device cuda --dtype float32
