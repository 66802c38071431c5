"""Peer venvs (SB3, SB3 with MuJoCo, Sample Factory, PufferLib) in ``benchmarks/peers/.venvs``.

Each venv is built with pip in two steps: torch first (``torch==2.13.0``, the CPU wheel on this
machine's disk, unless the peer pins another), then the peer with torch pinned to the same
version, so pip never swaps torch. A stamp file holding the requirement list makes reruns a
no-op.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENVS = Path(__file__).resolve().parent / ".venvs"
TORCH = "torch==2.13.0"

#: name -> pip requirements (installed after torch, with torch pinned beside them).
PEERS: dict[str, list[str]] = {
    "sb3": ["stable-baselines3==2.9.*"],
    # SAC on MuJoCo tasks: the same gymnasium and MuJoCo as mtrl's .venv.
    "sb3_mujoco": ["stable-baselines3==2.9.*", "gymnasium[mujoco]==1.4.0", "mujoco==4.0.0"],
    # SB3's SAC on an mtrl env (scisim/heat1d): mtrl and the plugin installed beside SB3, the
    # env stepped one copy at a time through mtrl.plugins.SingleCopyEnv.
    "sb3_mtrl": [
        "stable-baselines3==2.9.*",
        str(ROOT),
        str(ROOT / "plugins_contrib" / "mtrl-scisim"),
    ],
    # Sample Factory 2.1.1 pins numpy<2 and gymnasium<1.0 itself; pip resolves the rest.
    "sf": ["sample-factory==2.1.1"],
    # PufferLib 3's trainer (pufferl) and vectorisation; its compiled ops (pufferlib._C) are
    # built against torch 2.9.0 exactly, whose PyPI wheel is a CUDA build (run on the CPU here).
    "pufferlib": ["pufferlib-core==3.0.23"],
}

#: Peers whose wheels pin a torch other than :data:`TORCH`.
TORCH_OF: dict[str, str] = {"pufferlib": "torch==2.9.0"}


def python_of(name: str) -> Path:
    """The interpreter of peer venv ``name``."""
    return VENVS / name / "bin" / "python"


def _stamp(name: str) -> str:
    torch = TORCH_OF.get(name, TORCH)
    return json.dumps({"python": sys.version.split()[0], "torch": torch, "reqs": PEERS[name]})


def ensure(name: str, log: Callable[[str], object] = print) -> float:
    """Build venv ``name`` unless its stamp matches; return the seconds spent building."""
    root = VENVS / name
    stamp = root / ".mtrl-stamp"
    if stamp.exists() and stamp.read_text() == _stamp(name) and python_of(name).exists():
        return 0.0
    t0 = time.perf_counter()
    log(f"building peer venv {name!r} in {root} (once; a few minutes) ...")
    if root.exists():
        shutil.rmtree(root)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(root)], check=True)
    pip = [str(python_of(name)), "-m", "pip", "install", "-q", "--no-input"]
    torch = TORCH_OF.get(name, TORCH)
    subprocess.run([*pip, torch], check=True)
    subprocess.run([*pip, *PEERS[name], torch], check=True)
    subprocess.run([str(python_of(name)), "-m", "pip", "check"], check=False)
    seconds = time.perf_counter() - t0
    (root / ".mtrl-build-seconds").write_text(f"{seconds:.1f}\n")
    stamp.write_text(_stamp(name))
    log(f"peer venv {name!r} built in {seconds:.0f} s")
    return seconds


def build_seconds(name: str) -> float | None:
    """How long the existing venv ``name`` took to build (None if unknown)."""
    path = VENVS / name / ".mtrl-build-seconds"
    return float(path.read_text()) if path.exists() else None


if __name__ == "__main__":
    for peer in sys.argv[1:] or list(PEERS):
        ensure(peer)
