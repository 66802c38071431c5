"""Run a Ray scenario in its own process, inside a private network namespace when possible
(:mod:`mtrl.testing.netns`): every byte of a test stays on loopback, and the cluster is torn
down with the process whatever happens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mtrl.testing.netns import in_private_network

SCENARIOS = Path(__file__).with_name("scenarios.py")
REPO = Path(__file__).resolve().parents[2]


def run_scenario(
    name: str, timeout: float = 1200.0, script: Path = SCENARIOS, **kwargs: Any
) -> dict[str, Any]:
    """Run ``<script>.<name>(**kwargs)`` (default: scenarios.py) and return the dict it
    returns; a failure shows the scenario's output."""
    cmd = in_private_network([sys.executable, str(script), name, json.dumps(kwargs)])
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    env.setdefault("WANDB_MODE", "offline")
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)
    out = proc.stdout + proc.stderr
    results = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and results, (
        f"scenario {name} failed (exit {proc.returncode}):\n{out[-6000:]}"
    )
    return json.loads(results[-1][len("RESULT ") :])
