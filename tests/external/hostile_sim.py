"""A hostile simulation for the end-to-end fault tests (run as a script, launched by mtrl).

It speaks the coupling protocol correctly (a trivial physics: observation ``(t / 20, a, 0)``,
reward 0, episodes cut by mtrl at 20 steps) until its ``--at``-th STEP request, then misbehaves
as ``--behaviour`` says, with the hostile replies of ``test_fuzz_peer.py`` played by a real
launched process instead of a thread:

* ``garbage``: frames of random bytes instead of a reply;
* ``huge``: a 1 GiB frame, far over mtrl's ``max_message_bytes`` (a zero-filled mapping: this
  process touches no memory for it, and mtrl drops the connection at the frame's header);
* ``sizes``: a STEP reply whose observation frame is a few bytes short;
* ``flood``: ``--flood`` replies to earlier requests (stale sequence numbers), then nothing;
* ``silence``: nothing at all (the socket stays open: libzmq keeps answering heartbeats, so
  only mtrl's step timeout can tell).

Before misbehaving it says what it does on stderr, so a fault's message can quote it; then it
idles until mtrl's launcher ends it (at most ``--linger`` seconds). A CLOSE before the chosen
step is acknowledged and ends the process.
"""

from __future__ import annotations

import argparse
import mmap
import sys
import time

import numpy as np
import zmq

from mtrl.coupling import curve
from mtrl.coupling import protocol as P
from mtrl.coupling.client import heartbeat_options

BEHAVIOURS = ("garbage", "huge", "sizes", "flood", "silence")
LIMIT = 20
OBS = 3
SPEC = P.spec_json(
    {"dtype": "float32", "shape": [OBS]},
    {"type": "box", "dtype": "float32", "shape": [1], "low": -1.0, "high": 1.0},
    max_episode_steps=LIMIT,
    name="hostile",
)


class Peer:
    """The well-behaved part: the correct reply to each request of one handshake."""

    def __init__(self) -> None:
        self.n = 0
        self.t = np.zeros(0, np.int64)

    def reply(self, head: P.Header, frames: list[bytes]) -> list[bytes]:
        out = P.Header(head.op, head.seq, count=head.count if head.op == P.HELLO else 0).pack()
        if head.op == P.HELLO:
            self.n, self.t = head.count, np.zeros(head.count, np.int64)
            return [out, SPEC]
        if head.op == P.CLOSE:
            return [out]
        if head.op == P.RESET:
            self.t[:] = 0
            return [out, self.obs(np.zeros(self.n, np.float32))]
        reset = np.frombuffer(frames[1], np.uint8).astype(bool)
        self.t = np.where(reset, 0, self.t + 1)
        actions = np.frombuffer(frames[0], np.float32)
        zeros = np.zeros(self.n, np.uint8)
        reward = np.zeros(self.n, np.float32).tobytes()
        return [out, self.obs(actions), reward, zeros.tobytes(), zeros.tobytes()]

    def obs(self, actions: np.ndarray) -> bytes:
        obs = np.zeros((self.n, OBS), np.float32)
        obs[:, 0] = self.t / LIMIT
        obs[:, 1] = actions
        return obs.tobytes()


def misbehave(sock: zmq.Socket, peer: Peer, head: P.Header, frames: list, args) -> None:
    """Answer the request ``head`` the hostile way ``args.behaviour`` names (or not at all)."""
    what = args.behaviour
    if what == "garbage":
        rng = np.random.default_rng(args.seed)
        sock.send_multipart([rng.bytes(int(k)) for k in rng.integers(0, 100, 1 + args.seed % 4)])
    elif what == "huge":
        sock.send_multipart(
            [peer.reply(head, frames)[0], memoryview(mmap.mmap(-1, 1 << 30))], copy=False
        )
    elif what == "sizes":
        well = peer.reply(head, frames)
        sock.send_multipart([well[0], well[1][:-3], *well[2:]])
    elif what == "flood":
        for j in range(args.flood):
            stale = P.Header(head.op, (head.seq - 1 - j) & 0xFFFFFFFF).pack()
            sock.send_multipart([stale, *peer.reply(head, frames)[1:]])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("address")
    ap.add_argument("--behaviour", choices=BEHAVIOURS, required=True)
    ap.add_argument("--at", type=int, default=1, help="misbehave at this STEP request (1: first)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flood", type=int, default=2000)
    ap.add_argument("--linger", type=float, default=600.0)
    args = ap.parse_args()
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    for opt, value in heartbeat_options(1.0).items():
        sock.setsockopt(opt, value)
    curve.simulation_side(sock, args.address)
    sock.connect(args.address)
    peer, steps = Peer(), 0
    while True:
        frames = sock.recv_multipart()
        head = P.Header.unpack(frames[0])
        steps += head.op == P.STEP
        if head.op == P.STEP and steps >= args.at:
            break
        sock.send_multipart(peer.reply(head, frames[1:]))
        if head.op == P.CLOSE:
            return 0
    print(f"hostile_sim: {args.behaviour} at STEP {steps}", file=sys.stderr, flush=True)
    misbehave(sock, peer, head, frames[1:], args)
    time.sleep(args.linger)  # the launcher ends this process when mtrl gives up on it
    return 0


if __name__ == "__main__":
    sys.exit(main())
