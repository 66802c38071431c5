"""``learner.parallel.sync: async``: replicas that mix their states by gossip, with no barrier.

Every H (``sync_every``) updates a replica sends its
:class:`~mtrl.sync.replica_state.ReplicaState` to one peer, the next one in turn, and mixes
into its own state the newest state each peer has sent it since (a uniform average of itself
and them; :func:`~mtrl.sync.replica_state.mean_state`). Nothing waits: a send that finds
the peer's queue full is dropped (the peer still has an older copy; the next one goes to
another peer), and a replica that has received nothing goes on alone. A slow replica thus
sends and mixes less often but never holds up the others (GALA, Assran et al. 2019, mixes
with one peer at a time in the same way; here without its pairwise handshake).

The messages also carry each replica's env-step count, so that every replica estimates the
run's progress (its own steps plus the newest count of each peer) for the learning-rate
schedule and its stop; at its stop a replica tells every peer its final count, then all meet
once in :meth:`GossipSync.finish` to average their states, so the run ends with one model.

Transport: ZeroMQ PUSH/PULL over TCP beside the process group, not the group itself: the
group's point-to-point operations would make a send wait for its receiver. Each replica binds
its PULL socket on the address its host reaches the rendezvous (``MASTER_ADDR``) from, on a
port the OS picks; the addresses and CURVE public keys (a key pair per replica and run,
:mod:`mtrl.coupling.curve`) are exchanged once through the process group. Frames over the
state's size are refused before they are read (``ZMQ_MAXMSGSIZE``).
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

import torch
import torch.distributed as dist

from mtrl.coupling import curve
from mtrl.errors import UserError
from mtrl.learner.distributed import DistContext
from mtrl.sync.average import average_replica_states
from mtrl.sync.replica_state import Reconcilable, ReplicaState, mean_state

__all__ = ["GossipSync", "local_address"]

_SEND_QUEUE = 2  # states queued per peer; a send beyond is dropped, not waited for
_FINAL_SEND_S = 600.0  # the longest a replica's final count may wait for its peer to take it


def local_address(master: str | None = None) -> str:
    """The IP this host reaches ``master`` (default ``MASTER_ADDR``, else loopback) from: the
    interface the replicas already share. No packet is sent (a UDP socket's route lookup)."""
    master = master or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    try:
        infos = socket.getaddrinfo(master, 29500, socket.AF_INET, socket.SOCK_DGRAM)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(infos[0][4])
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


class GossipSync:
    """Asynchronous gossip among ``ctx``'s replicas (module docstring)."""

    joint = False
    """Replicas never meet while training: every decision is taken alone."""

    def __init__(self, learner: Reconcilable, ctx: DistContext, every: int) -> None:
        try:
            import zmq
        except ImportError as e:
            raise UserError(
                f"learner.parallel.sync: gossip needs pyzmq: pip install 'mtrl[external]' "
                f"({type(e).__name__}: {e})"
            ) from None

        self.learner = learner
        self.ctx = ctx
        self.every = every
        template = learner.replica_state()
        self._sizes = [t.numel() * t.element_size() for t in _tensors(template)]
        self._template = template
        self.zmq = zmq
        self.context = zmq.Context()
        public, secret = curve.keypair()
        self.pull = self.context.socket(zmq.PULL)
        curve.set_server(self.pull, secret)
        curve.set_limit(self.pull, max(self._sizes) + 4096)
        self.pull.setsockopt(zmq.LINGER, 0)
        host = local_address()
        port = self.pull.bind_to_random_port(f"tcp://{host}")
        mine = (f"tcp://{host}:{port}", public)
        everyone: list[Any] = [None] * ctx.world_size
        dist.all_gather_object(everyone, mine)  # once, at the start
        self.push: dict[int, Any] = {}
        for rank, (address, key) in enumerate(everyone):
            if rank == ctx.rank:
                continue
            sock = self.context.socket(zmq.PUSH)
            curve.set_client(sock, key)
            sock.setsockopt(zmq.SNDHWM, _SEND_QUEUE)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(address)
            self.push[rank] = sock
        self.peers = sorted(self.push)
        self.peer_steps = dict.fromkeys(self.peers, 0)
        self.finished: set[int] = set()
        self._waiting: dict[int, ReplicaState] = {}  # the newest state of each peer, not mixed
        self.next_at = self._version + every
        self.turn = 0
        self.sent = self.dropped = self.mixed = 0
        self.bytes_sent = 0

    @property
    def _version(self) -> int:
        return int(getattr(self.learner, "version", 0))

    def after_update(self, env_steps: int) -> bool:
        """Every H updates: send to the next peer, mix in what came. Never a joint point."""
        self._receive(mix=self._version >= self.next_at)
        if self._version >= self.next_at:
            self._send(self.peers[self.turn % len(self.peers)], env_steps)
            self.turn += 1
            self.next_at = self._version + self.every
        return False

    def global_steps(self, own_steps: int) -> int:
        """The run's env steps as this replica knows them: its own and each peer's newest."""
        return own_steps + sum(self.peer_steps.values())

    def run_steps(self, own_steps: int, joint_steps: int, own_at_joint: int, replicas: int) -> int:
        """:meth:`global_steps` (the replicas never meet: the joint figures are unused)."""
        return self.global_steps(own_steps)

    def plan(self, global_steps: float, budget: float) -> None:
        """Nothing to plan: the gossip runs on its own period."""

    def _send(self, peer: int, env_steps: int, final: bool = False) -> None:
        header = json.dumps(
            {"rank": self.ctx.rank, "env_steps": int(env_steps), "final": final}
        ).encode()
        frames = [header]
        if not final:
            state = self.learner.replica_state()
            frames += [t.detach().cpu().contiguous().numpy().tobytes() for t in _tensors(state)]
        sock = self.push[peer]
        try:
            if final:  # must arrive: the peer drains its queue while it trains or waits
                sock.setsockopt(self.zmq.SNDTIMEO, int(_FINAL_SEND_S * 1000))
            sock.send_multipart(frames, flags=0 if final else self.zmq.NOBLOCK, copy=False)
        except self.zmq.Again:
            if final:
                raise RuntimeError(
                    f"gossip: replica {peer} took no message for {_FINAL_SEND_S:.0f} s at the "
                    "end of the run: has it died?"
                ) from None
            self.dropped += 1
            return
        self.sent += 1
        self.bytes_sent += sum(len(f) for f in frames)

    def _receive(self, mix: bool) -> None:
        """Take every message waiting; mix in the newest state of each peer when ``mix``
        (states that come between two mixes wait for the next, newest first)."""
        newest = self._waiting
        while True:
            try:
                frames = self.pull.recv_multipart(flags=self.zmq.NOBLOCK)
            except self.zmq.Again:
                break
            head = json.loads(frames[0])
            rank = int(head["rank"])
            self.peer_steps[rank] = max(self.peer_steps.get(rank, 0), int(head["env_steps"]))
            if head["final"]:
                self.finished.add(rank)
                continue
            newest[rank] = self._decode(frames[1:], rank)
        self._waiting = newest
        if mix and newest:
            own = self.learner.replica_state()
            device = own.params.device
            states = [own, *(_to(s, device) for s in newest.values())]
            self.learner.load_replica_state(mean_state(states))
            self.mixed += len(newest)
            self._waiting = {}

    def _decode(self, frames: list[Any], rank: int) -> ReplicaState:
        t = self._template
        if len(frames) != 3 or [len(f) for f in frames] != self._sizes:
            raise RuntimeError(
                f"gossip: replica {rank} sent frames of {[len(f) for f in frames]} bytes, "
                f"expected {self._sizes}: are all replicas running the same model?"
            )
        out = [
            torch.frombuffer(bytearray(f), dtype=like.dtype).view_as(like.cpu())
            for f, like in zip(frames, _tensors(t), strict=True)
        ]
        return ReplicaState(*out)

    def finish(self, env_steps: int) -> None:
        """Tell every peer this replica's final count, wait (outside the process group, whose
        collectives time out) until every peer has said its own, then average all replicas'
        states once: every replica calls it at its end."""
        for peer in self.peers:
            self._send(peer, env_steps, final=True)
        while len(self.finished) < len(self.peers):
            if self.pull.poll(timeout=1000):
                self._receive(mix=False)
        state = average_replica_states(self.learner.replica_state(), self.ctx.world_size)
        self.learner.load_replica_state(state)
        self.close()

    def metrics(self) -> dict[str, float]:
        return {
            "sync/sent": float(self.sent),
            "sync/dropped": float(self.dropped),
            "sync/mixed": float(self.mixed),
            "sync/bytes_sent": float(self.bytes_sent),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"next_at": self.next_at, "turn": self.turn, "bytes_sent": self.bytes_sent}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.next_at = int(state["next_at"])
        self.turn = int(state["turn"])
        self.bytes_sent = int(state["bytes_sent"])

    def close(self) -> None:
        """Close the sockets (again: nothing)."""
        if self.context.closed:
            return
        for sock in (self.pull, *self.push.values()):
            sock.close(linger=0)
        self.context.term()


def _tensors(state: ReplicaState) -> list[torch.Tensor]:
    return [state.params, state.stats, state.seen]


def _to(state: ReplicaState, device: torch.device) -> ReplicaState:
    return ReplicaState(state.params.to(device), state.stats.to(device), state.seen.to(device))
