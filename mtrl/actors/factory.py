"""The actor pool a config asks for (``actors.mode``): serial, process/thread (acting through
the central inference server or with their own copy of the policy: ``actors.inference``), or
Ray (with ``actors.ray.local_actors``, Ray beside local worker processes).

Ray's pool is imported only when asked for, so Ray stays an optional extra.
"""

from __future__ import annotations

import torch

from mtrl.actors.faults import FaultPolicy
from mtrl.actors.inference import InferenceModel
from mtrl.actors.pool import ParallelPool, TaskSetup
from mtrl.actors.pool_protocol import ActorPool
from mtrl.actors.serial_pool import SerialPool
from mtrl.config import ExperimentConfig
from mtrl.plugins import BatchEnv


def make_pool(
    cfg: ExperimentConfig,
    tasks: list[TaskSetup | None],
    envs: list[BatchEnv | None],
    model: torch.nn.Module,
) -> ActorPool:
    """The pool of ``cfg.actors.mode`` for ``tasks`` (None: a task this pool does not run).

    ``envs`` are the serial pool's, built by the caller; ``model`` is the learner's (serial
    mode acts with it directly; the others keep their own copy, refreshed by ``publish``).
    """
    mode, sc = cfg.actors.mode, cfg.scheduler
    if mode == "serial":
        return SerialPool(
            tasks, envs, cfg.learner.unroll_length, InferenceModel(model, shared=True)
        )
    faults = FaultPolicy(max_restarts=sc.max_restarts, step_timeout_s=sc.step_timeout_s)
    if mode == "ray" and cfg.actors.ray.local_actors > 0:
        from mtrl.actors.hybrid_pool import HybridPool

        return HybridPool(
            tasks,
            cfg.learner.unroll_length,
            InferenceModel(model),
            local_actors=cfg.actors.ray.local_actors,
            placements=[t.placement for t in cfg.tasks],
            ray_config=cfg.actors.ray,
            num_slots=cfg.actors.slots_per_actor,
            start_method=cfg.actors.start_method,
            faults=faults,
            local_inference=local_inference(cfg.actors.inference, "process", model),
        )
    if mode == "ray":
        from mtrl.actors.ray_pool import RayPool

        return RayPool(
            tasks,
            cfg.learner.unroll_length,
            InferenceModel(model),
            placements=[t.placement for t in cfg.tasks],
            ray_config=cfg.actors.ray,
            num_slots=cfg.actors.slots_per_actor,
            faults=faults,
        )
    return ParallelPool(
        tasks,
        cfg.learner.unroll_length,
        InferenceModel(model),
        mode=mode,
        num_slots=cfg.actors.slots_per_actor,
        start_method=cfg.actors.start_method,
        faults=faults,
        local_inference=local_inference(cfg.actors.inference, mode, model),
    )


def local_inference(setting: str, mode: str, model: torch.nn.Module) -> bool:
    """Whether process/thread actors act with their own copy of the policy
    (``actors.inference``). ``auto``: process actors with the learner's model on the CPU —
    the forward then leaves the learner's process; thread actors share its interpreter lock
    anyway, and an accelerator batches the forward best where the model is."""
    if setting == "auto":
        return mode == "process" and next(model.parameters()).device.type == "cpu"
    return setting == "local"
