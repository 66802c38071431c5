"""How a remote actor's failures read: the fault kind and one line for an exception from a Ray
call, and when an unroll has run so long past the actor's usual time that an env step hung.

Pure functions for :class:`~mtrl.actors.ray_pool.RayPool`'s supervision (docs/FAULTS.md): the
kinds are those every pool counts (``raise``, ``nan``, ``hang``, ``exit``, ``lost``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from mtrl.actors.worker import fault_kind


def overdue_unroll(running_s: float, walls: Sequence[float], step_timeout_s: float) -> str | None:
    """The fault text when an unroll running for ``running_s`` is more than ``step_timeout_s``
    past the median of the actor's recent unroll walls (``walls``; 0 if none finished yet),
    else None."""
    usual = statistics.median(walls) if walls else 0.0
    if running_s <= usual + step_timeout_s:
        return None
    was = f"its usual {usual:.1f}s" if walls else "no unroll finished before"
    return (
        f"an unroll ran {running_s:.0f}s ({was}), more than step_timeout_s="
        f"{step_timeout_s:g} over: an env step hung; the actor was killed"
    )


def describe_ray_error(exc: BaseException) -> tuple[str, str]:
    """(fault kind, one-line text) of an exception from a remote actor's call: the env's own
    error (``raise``, ``nan``, ``hang`` for a ``TimeoutError``) or the actor's death
    (``exit``: killed, crashed, or its node left the cluster)."""
    import ray.exceptions as rex

    if isinstance(exc, rex.RayTaskError):
        cause = exc.cause if isinstance(exc.cause, BaseException) else exc
        kind = fault_kind(cause)
        return kind, f"{type(cause).__name__}: {_first_line(str(cause))}"
    if isinstance(exc, rex.RayActorError | rex.ObjectLostError | rex.WorkerCrashedError):
        return "exit", "the actor process died (killed, or crashed): " + _first_line(str(exc))
    return "exit", f"{type(exc).__name__}: {_first_line(str(exc))}"


def _first_line(text: str, limit: int = 300) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."
