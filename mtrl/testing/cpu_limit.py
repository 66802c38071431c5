"""A straggler made for real: a command and its children held to a fraction of a core by the
kernel's CPU controller (a cgroup's ``cpu.cfs_quota_us``), v1 or v2, whichever is mounted.

    with CpuLimit(cores=0.33) as limit:
        subprocess.run(limit.wrap(cmd))

Needs root and a mounted CPU controller; :func:`unavailable` says what is missing. The group
is removed on exit (after its processes have ended).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["CpuLimit", "unavailable"]

_V1 = Path("/sys/fs/cgroup/cpu")
_V2 = Path("/sys/fs/cgroup")
_PERIOD_US = 100_000


def _root() -> tuple[Path, int] | None:
    """Where CPU-limited groups are made, and the cgroup version there."""
    if (_V1 / "cpu.cfs_quota_us").exists():
        return _V1, 1
    control = _V2 / "cgroup.subtree_control"
    if control.exists() and "cpu" in control.read_text().split():
        return _V2, 2
    return None


def unavailable() -> str | None:
    """Why :class:`CpuLimit` cannot work here (None: it can)."""
    if os.geteuid() != 0:
        return "cgroups need root"
    if _root() is None:
        return "no cgroup CPU controller is mounted"
    return None


class CpuLimit:
    """A cgroup that holds its processes to ``cores`` CPU cores (module docstring)."""

    def __init__(self, cores: float, name: str | None = None) -> None:
        if cores <= 0:
            raise ValueError(f"CpuLimit needs cores > 0, got {cores}")
        why = unavailable()
        if why is not None:
            raise RuntimeError(f"cannot limit CPU here: {why}")
        found = _root()
        assert found is not None
        root, self.version = found
        self.path = root / (name or f"mtrl-{os.getpid()}-{id(self):x}")
        self.cores = cores

    def __enter__(self) -> CpuLimit:
        self.path.mkdir()
        quota = max(1000, int(self.cores * _PERIOD_US))
        if self.version == 1:
            (self.path / "cpu.cfs_period_us").write_text(str(_PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (self.path / "cpu.max").write_text(f"{quota} {_PERIOD_US}")
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in range(100):  # the group goes once its last process has
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)

    def wrap(self, cmd: list[str]) -> list[str]:
        """``cmd`` wrapped to run inside the group, its children too."""
        procs = self.path / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *cmd]
