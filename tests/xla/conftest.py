"""XLA tests run on torch_xla's CPU PJRT device unless told otherwise (set before import)."""

from __future__ import annotations

import os

os.environ.setdefault("PJRT_DEVICE", "CPU")
