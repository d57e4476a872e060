"""An environment in which `import torch` fails, as on a machine without it."""

from __future__ import annotations

import os
from pathlib import Path

_BLOCKER = (
    "import sys\nclass _NoTorch:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'torch' or name.startswith('torch.'):\n"
    "            raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n"
    "sys.meta_path.insert(0, _NoTorch())\n"
)


def without_torch(folder: Path) -> dict[str, str]:
    """The environment for a subprocess in which torch cannot be imported: a
    `sitecustomize` written to `folder` refuses it, whether installed or not."""
    (folder / "sitecustomize.py").write_text(_BLOCKER)
    return {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
