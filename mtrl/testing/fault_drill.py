"""A fault drill for plugin authors: break an env's simulation under a real actor and watch mtrl
count the fault, restart the actor and get unrolls again.

    from mtrl.testing import fault_drill

    drill = fault_drill("heat/heat2d", 2, inject=kill_rank_1, env_kwargs={"ranks": 2})
    assert drill.faults.by_kind["raise"] == 1 and drill.unrolls_after >= 2

One actor of the env runs in a process-mode actor pool (``forkserver``, a small untrained
policy), exactly as ``mtrl train`` runs it. Once it has delivered its first unroll,
``inject()`` is called once, from the test's process: kill or stop the simulation's process,
cut its socket, fill its disk. The drill then waits until the actor has been restarted and has
delivered ``unrolls_after`` more unrolls, or until ``deadline_s``; it asserts nothing itself
and returns what happened. An env of several simulation processes that restarts a failed one
alone (``copies_per_process`` with member restart, :mod:`mtrl.plugins.external.members`) is
recovered without an actor restart: the drill then waits for the member's fault
(``member_faults``) and the unrolls after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class DrillResult:
    """What the pool saw: its fault record of the task, its events, and the unrolls the
    actor delivered after ``inject`` ran (None: it never ran, no first unroll came)."""

    faults: Any  # mtrl.actors.faults.TaskFaults
    events: list[Any] = field(default_factory=list)  # mtrl.actors.server.ActorEvent
    unrolls_after: int | None = None
    member_faults: list[tuple] = field(default_factory=list)
    """Failures of single simulation processes, each restarted alone or quarantined while
    the actor went on (``UnrollInfo.member_faults``: member, copies, kind, text, quarantined)."""


def fault_drill(
    env_id: str,
    num_envs: int,
    inject: Callable[[], object],
    *,
    env_kwargs: dict[str, Any] | None = None,
    step_timeout_s: float = 20.0,
    unrolls_after: int = 2,
    deadline_s: float = 180.0,
) -> DrillResult:
    """Run one actor of ``env_id`` (``num_envs`` copies), call ``inject()`` after its first
    unroll, and return once it restarted and delivered ``unrolls_after`` unrolls (see the
    module docstring). ``step_timeout_s`` is the pool's hang timeout."""
    import torch

    from mtrl.actors.faults import FaultPolicy
    from mtrl.actors.inference import InferenceModel
    from mtrl.actors.pool import ParallelPool, TaskSetup
    from mtrl.config import ModelConfig
    from mtrl.learner.model import MultiTaskModel, TaskSpaces
    from mtrl.plugins import get_plugins

    spec = get_plugins().envs.get(env_id)
    obs_space, act_space = spec.observation_space, spec.action_space
    task = TaskSetup(
        0, env_id, env_id, num_envs, 0, 1.0, obs_space, act_space, dict(env_kwargs or {})
    )
    torch.manual_seed(0)
    model = MultiTaskModel([TaskSpaces(obs_space, act_space)], ModelConfig(encoder_dim=16))
    pool = ParallelPool(
        [task],
        8,
        InferenceModel(model),
        start_method="forkserver",
        faults=FaultPolicy(backoff_base_s=0.05, step_timeout_s=step_timeout_s),
    )
    result = DrillResult(pool.faults[0])
    unrolls, injected = 0, False
    try:
        pool.set_actors([1])
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            for ru in pool.get(timeout=0.2):
                unrolls += 1
                result.member_faults += ru.info.member_faults
                pool.release(ru)
            result.events += pool.events()
            if not injected and unrolls >= 1:
                inject()
                injected, unrolls = True, 0
            recovered = pool.faults[0].restarts >= 1 or result.member_faults
            if injected and recovered and unrolls >= unrolls_after:
                break
    finally:
        pool.close()
    result.faults = pool.faults[0]
    result.unrolls_after = unrolls if injected else None
    return result
