"""The body of one Ray actor: a task's batch env stepped with a local CPU copy of the policy.

:class:`RemoteActor` is a plain class; :mod:`mtrl.actors.ray_pool` wraps it with
``ray.remote`` (so this module, like everything outside the pool, never imports Ray). Each call
of :meth:`RemoteActor.unroll` fills one unroll — IMPALA's arrangement: the actor acts with its
own copy of the policy, loads newer weights (numpy arrays from Ray's object store) at the unroll
boundary, and stamps every step with the version that acted, so the learner measures the lag and
V-trace corrects it. Two buffers alternate: Ray serialises the returned one after the call, and
the next call carries its bootstrap observation into the other.

With sharded replay and a rule that draws only from its replay, the actor is given its task's
:class:`~mtrl.actors.shard_insert.ShardRoute`: it stores each unroll in a shard on its own
node and returns a :class:`~mtrl.actors.shard_insert.ShardedUnroll` (a few numbers) instead
of the arrays.

An env failure propagates out of :meth:`unroll` as the env's own exception (Ray wraps it); the
pool reads the kind from it (:func:`mtrl.actors.worker.fault_kind`) and replaces the actor.
"""

from __future__ import annotations

import faulthandler
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mtrl.actors import protocol as P
from mtrl.actors.core_states import CoreStates
from mtrl.actors.inference import InferenceModel
from mtrl.actors.runner import EnvStepper
from mtrl.actors.shard_insert import ShardedUnroll, ShardRoute, ShardWriter
from mtrl.actors.unroll import UnrollBuffer
from mtrl.actors.worker import ACTOR_PROCESS_ENV, ActorJob

#: A policy's weights as sent to remote actors: parameter and buffer name -> numpy array.
Weights = dict[str, np.ndarray]


@dataclass(frozen=True, kw_only=True)
class RemoteActorSpec(ActorJob):
    """A Ray actor: its job, and how it acts (greedy for tests; torch threads = its CPUs)."""

    greedy: bool = False
    torch_threads: int = 1


def weights_of(model: torch.nn.Module) -> Weights:
    """``model``'s parameters and buffers as CPU numpy arrays (what goes to the object store;
    numpy arrays come back zero-copy from it)."""
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


def buffer_arrays(buf: UnrollBuffer) -> dict[str, Any]:
    """The arrays of ``buf`` by field (what a remote actor returns; the pool rebuilds the
    buffer with :meth:`UnrollBuffer.from_arrays` around them)."""
    out: dict[str, Any] = {"obs": buf.obs}
    for name in (
        "actions",
        "behaviour_logp",
        "rewards",
        "terminated",
        "truncated",
        "valid",
        "versions",
        "core_state",  # None for a feed-forward model
    ):
        out[name] = getattr(buf, name)
    return out


class RemoteActor:
    """One actor of one task, living in a Ray worker process (possibly on another node)."""

    def __init__(self, spec: RemoteActorSpec, model: torch.nn.Module) -> None:
        """Cheap on purpose: the env is built by :meth:`start`, whose failure the pool can
        read as a fault of the task (an exception in a Ray actor's constructor only shows as
        a dead actor)."""
        os.environ[ACTOR_PROCESS_ENV] = str(spec.actor_id)
        faulthandler.enable()
        torch.set_num_threads(spec.torch_threads)
        self.spec = spec
        self.inference = InferenceModel(model, greedy=spec.greedy)
        self.states = CoreStates(self.inference)  # a recurrent model's per-env states
        self.stepper: EnvStepper | None = None
        self.buffers: list[UnrollBuffer] = []
        self.turn = 0
        self.writer: ShardWriter | None = None

    def start(self, route: ShardRoute | None = None) -> str:
        """Build and reset the env; returns the id of the node this actor runs on.
        ``route``: where to store the unrolls (:meth:`set_route`)."""
        from mtrl.plugins import get_plugins
        from mtrl.plugins.external import sim_logs

        s = self.spec
        with sim_logs.for_task(s.task_name):  # a simulation's logs: in the task's folder
            env = get_plugins().envs.get(s.env_id).build(s.num_envs, s.seed, **s.env_kwargs)
        self.stepper = EnvStepper(env, s.reward_scale, f"{s.task_name} (actor {s.actor_id})")
        self.buffers = [
            UnrollBuffer.allocate(
                s.task,
                s.unroll_length,
                s.num_envs,
                env.single_observation_space,
                env.single_action_space,
                self.inference.state_size,
            )
            for _ in range(2)
        ]
        self.stepper.start(self.buffers[0])
        self.set_route(route)
        return _node_id()

    def set_route(self, route: ShardRoute | None) -> None:
        """Store the coming unrolls in this node's shards of ``route`` (resolved here, once:
        the node does not change); None: return them to the learner."""
        self.writer = None if route is None else ShardWriter(route, _node_id())

    def node(self) -> str:
        """The id of the node this actor runs on: asked before :meth:`start`, its answer says
        the actor has a node (the pool tells an actor waiting for room from one building its
        env)."""
        return _node_id()

    def load(self, weights: Weights, version: int) -> None:
        """Take ``weights`` (the learner's ``version``) for the next actions."""
        with warnings.catch_warnings(), torch.no_grad():
            # The arrays are read-only views of the object store; load_state_dict copies them.
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            state = {k: torch.as_tensor(v) for k, v in weights.items()}
            self.inference.model.load_state_dict(state)
        self.inference.version = version

    def unroll(
        self, weights: Weights | None, version: int
    ) -> tuple[dict[str, Any] | ShardedUnroll, P.UnrollInfo]:
        """Fill one unroll (after loading ``weights`` when they are newer than ours) and return
        its arrays — or, stored in this node's shard, its summary — and
        :class:`~mtrl.actors.protocol.UnrollInfo`."""
        assert self.stepper is not None, "start() first"
        if weights is not None and version > self.inference.version:
            self.load(weights, version)
        buf = self.buffers[self.turn]
        if self.stepper.env_steps > 0:  # not the first unroll: row 0 is the last one's end
            EnvStepper.carry(self.buffers[1 - self.turn], buf)
        states = self.states

        def act(b: UnrollBuffer, t: int) -> None:
            states.act_into(0, b, t)

        t0, env_s0 = time.perf_counter(), self.stepper.env_seconds
        self.stepper.fill(buf, act)
        returns, lengths, successes = self.stepper.episodes.drain()
        info = P.UnrollInfo(
            slot=self.turn,
            env_steps=buf.length * buf.num_envs,
            episode_returns=returns,
            episode_lengths=lengths,
            episode_successes=successes,
            env_seconds=self.stepper.env_seconds - env_s0,
            wall_seconds=time.perf_counter() - t0,
            member_faults=self.stepper.drain_member_faults(),
            member_events=self.stepper.drain_member_events(),
            members_present=self.stepper.members_present(),
        )
        self.turn = 1 - self.turn
        stored = self.writer.insert(buf) if self.writer is not None else None
        return (buffer_arrays(buf) if stored is None else stored), info

    def close(self) -> None:
        if self.stepper is not None:
            self.stepper.close()
            self.stepper = None


def _node_id() -> str:
    import ray  # present: this runs inside a Ray worker

    return ray.get_runtime_context().get_node_id()
