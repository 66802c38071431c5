"""Helpers of the external-env tests: the drift test simulations and process bookkeeping."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("zmq", reason="pyzmq is not installed: pip install 'mtrl[external]'")

HERE = Path(__file__).resolve().parent
PY_SIM = "{python} " + str(HERE / "drift_sim.py") + " {address}"


def sim_processes(marker: str, launchers: bool = True) -> set[int]:
    """Live processes whose command line contains ``marker`` (zombies excluded), with or
    without the launchers (whose command line holds the simulation's)."""
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if not launchers and "launcher.py" in cmd:
            continue
        if marker in cmd and " -c " not in cmd and state != "Z" and int(entry) != os.getpid():
            out.add(int(entry))
    return out


def wait_gone(marker: str, before: set[int], timeout: float = 10.0) -> set[int]:
    """Processes with ``marker`` not in ``before`` still alive after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = sim_processes(marker) - before
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def install_plugin(site: Path, name: str, code: str) -> Path:
    """Install plugin ``name`` (module ``mtrl_<name>`` holding ``code``) into the folder
    ``site`` the way pip would: with the metadata that registers its ``mtrl`` entry point.
    Processes with ``site`` on PYTHONPATH load it."""
    (site / f"mtrl_{name}.py").write_text(code)
    meta = site / f"mtrl_{name}-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: mtrl-{name}\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(f"[mtrl]\n{name} = mtrl_{name}\n")
    return site


@pytest.fixture(scope="session")
def c_drift_sim() -> Path:
    """The C twin of the drift simulation, built with gcc against the C client."""
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        pytest.skip("no C compiler (gcc): apt-get install gcc")
    from mtrl.coupling import cbuild

    return cbuild.build([HERE / "drift_sim.c"], "drift_sim", cflags=("-O2", "-Wall", "-Werror"))
