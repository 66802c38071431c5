"""A hostile or broken simulation against mtrl's side of the coupling (ExternalBatchEnv).

A peer thread binds a real ZeroMQ DEALER socket on ipc://, answers mtrl correctly until a
chosen request, then misbehaves (a wrong header, frames or sizes, an absurd spec, invalid JSON
or UTF-8, a flood of stale replies, an ERROR, a frame far over the size bound, silence) and
hangs up. mtrl attaches to it (attach mode), resets and steps. Every case must end in an
exception of the SimulationError family that says something, within a bounded time, and the
whole run must stay within a bounded memory. NaN and infinity in the replies before the fault
are passed through (the actors' finiteness check owns them) and must not break anything.
"""

from __future__ import annotations

import itertools
import json
import mmap
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtrl.coupling import curve
from mtrl.coupling import protocol as P
from mtrl.plugins.external import (
    ExternalSim,
    SimulationDisconnected,
    SimulationError,
    spaces_from_spec,
)

CASES = int(os.environ.get("MTRL_FUZZ_CASES", "1000"))  # CI runs 1000
OBS = 3  # float32 entries of one copy's observation (the well-behaved spec)
SPEC = P.spec_json(
    {"dtype": "float32", "shape": [OBS]},
    {"type": "box", "dtype": "float32", "shape": [1], "low": -1.0, "high": 1.0},
    max_episode_steps=5,
)
PHASES = ("HELLO", "RESET", "STEP", "STEP")
FAULTS = (
    "magic",
    "version",
    "op",
    "seq",
    "short",
    "extra",
    "size",
    "header",
    "count",
    "error",
    "flood",
    "huge",
    "silence",
    "close",
    "garbage",
    "spec",
    "spec",  # twice: the spec has the most ways to be wrong
)


@dataclass
class Plan:
    """What the peer does: answer well until request ``at``, then ``fault``."""

    num_envs: int
    at: int
    fault: str
    nan: bool = False
    value: int = 1  # the fault's number: a version, op, seq, size change, count...
    blob: bytes = b""  # the fault's bytes: an ERROR's text, a spec, garbage
    frames: list[bytes] = field(default_factory=list)


def _rss(field_name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field_name)


def _reset_peak() -> None:
    """Let VmHWM restart from the current RSS (Linux >= 4.0), so peaks of earlier tests do
    not hide this one's."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _well(op: int, seq: int, plan: Plan) -> list[bytes]:
    """The correct reply to a request (NaN/inf in the arrays when ``plan.nan``)."""
    n = plan.num_envs
    head = P.Header(op, seq, count=n if op == P.HELLO else 0).pack()
    if op == P.HELLO:
        return [head, SPEC]
    if op == P.CLOSE:
        return [head]
    fill = np.float32(np.nan if plan.nan else 0.25)
    obs = np.full((n, OBS), fill, np.float32)
    if plan.nan:
        obs[:, 0] = np.inf
    if op == P.RESET:
        return [head, obs.tobytes()]
    reward = np.full(n, -np.inf if plan.nan else 0.5, np.float32)
    flags = np.zeros(n, np.uint8)
    return [head, obs.tobytes(), reward.tobytes(), flags.tobytes(), flags.tobytes()]


def _faulty(op: int, seq: int, plan: Plan, max_bytes: int) -> list | None:
    """The misbehaving reply (None: none at all)."""
    well = _well(op, seq, plan)
    head = P.Header.unpack(well[0])
    pack = P.HEADER.pack
    f, v = plan.fault, plan.value
    if f == "magic":
        return [pack(plan.blob[:4].ljust(4, b"X"), 1, op, seq, head.count, 0), *well[1:]]
    if f == "version":
        return [pack(P.MAGIC, v, op, seq, head.count, 0), *well[1:]]
    if f == "op":
        return [pack(P.MAGIC, 1, v, seq, head.count, 0), *well[1:]]
    if f == "seq":
        return [pack(P.MAGIC, 1, op, v, head.count, 0), *well[1:]]
    if f == "short":
        return well[: max(len(well) - v, 1)] if len(well) > 1 else [well[0][: v % 24]]
    if f == "extra":
        return well + plan.frames
    if f == "size":
        i = 1 + v % max(len(well) - 1, 1)
        if i >= len(well):  # a CLOSE reply has no body: give it one
            return [*well, b"x" * (1 + v % 50)]
        body = well[i]
        change = plan.value % 97 + 1
        well[i] = body[:-change] if len(body) >= change and v % 2 else body + b"\0" * change
        return well
    if f == "header":
        return [well[0][: v % 24] if v % 2 else well[0] + b"\0" * (1 + v % 9), *well[1:]]
    if f == "count":
        return [pack(P.MAGIC, 1, P.HELLO, seq, v, 0), SPEC] if op == P.HELLO else well[:-1]
    if f == "error":
        return [P.Header(P.ERROR, seq).pack(), plan.blob]
    if f == "huge":  # a zero-filled mapping: no memory is touched on this side either
        size = max_bytes + 1 + v % ((1 << 30) - max_bytes)
        return [well[0], memoryview(mmap.mmap(-1, size))]
    if f == "garbage":
        return plan.frames or [b""]
    if f == "spec":
        return [well[0], plan.blob] if op == P.HELLO else well[:1]
    return None  # silence, close


def _peer(address: str, plan: Plan, ready: threading.Event, done: threading.Event) -> None:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 2000)  # let the last (faulty) message go out after close
    sock.bind(address)
    ready.set()
    try:
        for k in itertools.count():
            if not sock.poll(10_000):
                return
            head = P.Header.unpack(sock.recv_multipart()[0])
            if k < plan.at and head.op != P.CLOSE:
                sock.send_multipart(_well(head.op, head.seq, plan))
                continue
            if head.op == P.CLOSE:  # mtrl gave up before the fault: nothing left to test
                sock.send_multipart(_well(head.op, head.seq, plan))
                return
            if plan.fault == "flood":
                # As many stale replies as the socket takes without blocking: a busy mtrl
                # gives up (step timeout) and stops reading long before a blocking send
                # would return, and the peer must end with the case.
                for j in range(plan.value):
                    stale = (head.seq - 1 - j) & 0xFFFFFFFF
                    try:
                        sock.send_multipart(_well(head.op, stale, plan), flags=zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    if done.is_set():
                        break
                return
            reply = _faulty(head.op, head.seq, plan, curve.DEFAULT_MAX_MESSAGE_BYTES)
            if reply is not None:
                sock.send_multipart(reply, copy=False)
            if plan.fault == "silence":
                done.wait(30)
            return
    finally:
        sock.close()


def _specs() -> st.SearchStrategy[bytes]:
    """HELLO reply bodies: absurd or broken specs, invalid JSON and invalid UTF-8."""
    scalar = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(["inf", "-inf", "nan", "float32", "x"]),
    )
    shape = st.lists(st.one_of(st.integers(-3, 2**62), scalar), max_size=40)
    array = st.fixed_dictionaries(
        {},
        optional={
            "dtype": st.one_of(st.sampled_from([*P.DTYPES, "complex64", "bool"]), scalar),
            "shape": st.one_of(shape, scalar),
            "low": st.one_of(scalar, st.lists(scalar, max_size=10)),
            "high": st.one_of(scalar, st.lists(scalar, max_size=10)),
            "type": st.sampled_from(["box", "discrete", "multidiscrete", "tuple"]),
            "n": st.one_of(st.integers(-3, 2**64), scalar),
            "nvec": st.one_of(st.lists(st.integers(-3, 2**40), max_size=8), scalar),
        },
    )
    doc = st.fixed_dictionaries(
        {},
        optional={
            "observation": st.one_of(array, scalar),
            "action": st.one_of(array, scalar),
            "max_episode_steps": scalar,
            "name": scalar,
        },
    )
    as_json = doc.map(lambda d: json.dumps(d, allow_nan=True).encode())
    return st.one_of(
        _near_valid_specs(),
        _near_valid_specs(),
        as_json,
        as_json.map(lambda b: b"\xff\xfe" + b),  # invalid UTF-8
        as_json.map(lambda b: b[: len(b) // 2]),  # truncated JSON
        st.binary(max_size=300),
        st.just(b"[" * 100_000),  # nesting deeper than the JSON parser goes
    )


def _near_valid_specs() -> st.SearchStrategy[bytes]:
    """Specs of the right form with unlucky values: huge shapes, bounds crossed or of the wrong
    length, infinite bounds on integer arrays, huge discrete ranges."""
    bound = st.one_of(
        st.none(),
        st.floats(allow_nan=False),
        st.integers(-10, 10),
        st.lists(st.floats(allow_nan=False, width=32), min_size=1, max_size=4),
    )
    box = st.fixed_dictionaries(
        {
            "dtype": st.sampled_from(P.DTYPES),
            "shape": st.lists(
                st.one_of(st.integers(1, 4), st.integers(1, 1 << 22)), min_size=1, max_size=3
            ),
            "low": bound,
            "high": bound,
        }
    )
    action = st.one_of(
        box.map(lambda d: {**d, "type": "box"}),
        st.integers(1, (1 << 31) - 1).map(lambda n: {"type": "discrete", "n": n}),
        st.lists(st.integers(1, (1 << 31) - 1), min_size=1, max_size=4).map(
            lambda v: {"type": "multidiscrete", "nvec": v}
        ),
    )
    limit = st.one_of(st.none(), st.integers(-2, 1 << 40))
    doc = st.fixed_dictionaries({"observation": box, "action": action, "max_episode_steps": limit})
    return doc.map(lambda d: json.dumps(d).encode())


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    fault = draw(st.sampled_from(FAULTS))
    at = 0 if fault in ("spec", "count") else draw(st.integers(0, len(PHASES) - 1))
    value = {
        "version": st.integers(0, 0xFFFF).filter(lambda v: v != P.PROTOCOL_VERSION),
        "op": st.integers(0, 0xFFFF).filter(lambda v: v != P.ERROR),
        "seq": st.integers(0, 0xFFFFFFFF),
        "count": st.integers(0, 0xFFFFFFFF),
        "flood": st.integers(1, 3000),
        "huge": st.integers(0, 1 << 30),
    }.get(fault, st.integers(1, 1 << 20))
    frames = st.lists(st.binary(max_size=100), min_size=1, max_size=8)
    blob = st.binary(max_size=300) if fault != "spec" else _specs()
    return Plan(
        num_envs=draw(st.integers(1, 4)),
        at=at,
        fault=fault,
        nan=draw(st.booleans()),
        value=draw(value),
        blob=draw(blob),
        frames=draw(frames),
    )


def _fuzz(cases: int) -> settings:
    """Hypothesis settings for CI: the same cases every run, no deadline per case."""
    return settings(
        max_examples=cases,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def _play(plan: Plan, address: str) -> SimulationError:
    """Run one case; the exception it ended with."""
    ready, done = threading.Event(), threading.Event()
    peer = threading.Thread(target=_peer, args=(address, plan, ready, done), daemon=True)
    peer.start()
    assert ready.wait(10)
    # Short timeouts keep 1000 cases quick; a case ends in a SimulationError either way. The
    # 1 GB frame gets time to arrive, so that the size bound, not a timeout, is what ends it.
    patient = plan.fault == "huge"
    sim = ExternalSim(
        address=address,
        start_timeout_s=10.0 if patient else 0.5,
        step_timeout_s=10.0 if patient else 0.2,
        heartbeat_s=0.5,
    )
    env = None
    try:
        with pytest.raises(SimulationError) as caught:
            env = sim(plan.num_envs, 0)
            env.reset()
            for _ in range(4):
                env.step(np.zeros((plan.num_envs, 1), np.float32))
    finally:
        done.set()
        if env is not None:
            env.close()
        peer.join(30)
    assert not peer.is_alive(), "the peer thread ended"
    return caught.value


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 1000 cases: ~20-50 s alone, minutes on a loaded machine
def test_every_hostile_peer_ends_in_a_simulation_error_in_bounded_time_and_memory() -> None:
    counts: dict[str, int] = {}
    slowest = [0.0, ""]
    folder = Path(tempfile.mkdtemp(prefix="mtrl-fuzz-"))
    numbers = itertools.count()

    @_fuzz(CASES)
    @given(plans())
    def case(plan: Plan) -> None:
        t0 = time.monotonic()
        error = _play(plan, f"ipc://{folder}/{next(numbers)}.sock")
        took = time.monotonic() - t0
        assert str(error).strip(), f"{plan.fault}: an exception without a message"
        assert took < 30, f"{plan.fault} took {took:.1f}s"
        if plan.fault == "huge":
            assert isinstance(error, SimulationDisconnected), error
            assert "max_message_bytes" in str(error)
        counts[plan.fault] = counts.get(plan.fault, 0) + 1
        if took > slowest[0]:
            slowest[:] = [took, plan.fault]

    _reset_peak()
    base = _rss("VmRSS")
    t0 = time.monotonic()
    case()
    wall = time.monotonic() - t0
    growth = _rss("VmHWM") - base
    total = sum(counts.values())
    print(
        f"\nfuzz: {total} cases in {wall:.1f}s; slowest {slowest[0]:.2f}s ({slowest[1]}); "
        f"peak RSS growth {growth / 2**20:.0f} MiB; per fault {dict(sorted(counts.items()))}"
    )
    assert total >= CASES
    assert set(counts) == set(FAULTS), "every kind of fault was played"
    assert growth < 256 << 20, f"peak RSS grew by {growth / 2**20:.0f} MiB"
    os.rmdir(folder) if not any(folder.iterdir()) else None


def test_a_1_gib_frame_is_refused_before_it_is_read() -> None:
    """The size bound: libzmq drops the peer at the frame's header, so neither the 1 GiB nor
    the time to receive it is spent; peak RSS stays far below the frame."""
    _reset_peak()
    base = _rss("VmRSS")
    with tempfile.TemporaryDirectory() as folder:
        plan = Plan(
            num_envs=2, at=1, fault="huge", value=(1 << 30) - curve.DEFAULT_MAX_MESSAGE_BYTES - 1
        )
        error = _play(plan, f"ipc://{folder}/huge.sock")
    assert isinstance(error, SimulationDisconnected), error
    assert "max_message_bytes=67108864" in str(error)
    assert _rss("VmHWM") - base < 128 << 20


@_fuzz(2000)
@given(_specs())
def test_every_spec_gives_spaces_or_a_protocol_error(doc: bytes) -> None:
    """The spec alone, in process (many more cases than the peer test plays): a HELLO reply
    either parses into gymnasium spaces or is refused with a ProtocolError, never another
    exception; arrays too large for the size bound are left to the link (not built here)."""
    try:
        spec = P.parse_spec(doc)
    except P.ProtocolError as e:
        assert str(e)
        return
    if max(spec.observation.nbytes, spec.action.nbytes) <= curve.DEFAULT_MAX_MESSAGE_BYTES:
        spaces_from_spec(spec)
