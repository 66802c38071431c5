"""Commands in a private network namespace: how mtrl's Ray tests and benchmarks keep every
byte on loopback.

Ray, left alone, probes an outside address to find the machine's IP and binds the machine's
interface. Inside a fresh network namespace (``unshare -n``, loopback brought up) it finds
nothing but 127.0.0.1, and the cluster's processes live and die with the namespace's command.
Creating one needs root (or user namespaces); without it the command runs as it is.
"""

from __future__ import annotations

import functools
import shutil
import subprocess


@functools.cache
def can_unshare() -> bool:
    """Whether ``unshare -n`` works here (root, or user namespaces allowed)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


def in_private_network(cmd: list[str]) -> list[str]:
    """``cmd`` wrapped to run in a new network namespace with loopback up (unchanged when
    namespaces cannot be created here)."""
    if not can_unshare():
        return list(cmd)
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *cmd]
