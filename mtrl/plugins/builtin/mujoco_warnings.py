"""MuJoCo's C-level warnings as Python warnings, not prints plus a ``MUJOCO_LOG.TXT`` in the cwd.

Without a user handler MuJoCo prints each warning to the terminal and appends it to
``MUJOCO_LOG.TXT`` in the current directory (a simulation that blows up does; with mujoco 4.x,
so does compiling gymnasium's HalfCheetah model, for a deprecated XML attribute). With
:func:`route_mujoco_warnings` installed they become :class:`MujocoWarning`\\s, which Python's
warning filters show once, silence or record (``mtrl envs`` records them as an env's notes),
and no log file is written.
"""

from __future__ import annotations

import contextlib
import importlib.util
import warnings


class MujocoWarning(UserWarning):
    """A warning MuJoCo's C library raised (model compilation, simulation instability)."""


def _warn(message: str) -> None:
    """MuJoCo's warning callback: re-issue as a Python warning; never raise back into C."""
    with contextlib.suppress(Exception):  # warnings made errors: C cannot take an exception
        warnings.warn(f"MuJoCo: {message.strip()}", MujocoWarning, stacklevel=2)


def route_mujoco_warnings() -> None:
    """Install the handler once per process, if the ``mujoco`` package is installed and nobody
    installed another handler first (a user's own handler wins)."""
    if importlib.util.find_spec("mujoco") is None:
        return
    import mujoco

    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_warn)
