"""The wire format of the coupling protocol, version 1 (docs/COUPLING.md is the specification).

Every message is a ZeroMQ multipart message. Frame 0 is a fixed 24-byte little-endian header::

    offset  size  field
    0       4     magic  b"MTRL"
    4       2     version (u16)   PROTOCOL_VERSION
    6       2     op (u16)        HELLO, RESET, STEP, CLOSE, ERROR
    8       4     seq (u32)       request number; a reply repeats its request's seq
    12      4     count (u32)     HELLO: copies asked for / served; else 0
    16      8     arg (i64)       HELLO: the base seed; else 0

The remaining frames are raw arrays (C order, little-endian, no padding) whose dtypes and
shapes were fixed by the handshake, or UTF-8 text (the HELLO reply's JSON spec, an ERROR's
message). Nothing here depends on the rest of mtrl.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

PROTOCOL_VERSION = 1
MAGIC = b"MTRL"
HEADER = struct.Struct("<4sHHIIq")
assert HEADER.size == 24

HELLO, RESET, STEP, CLOSE, ERROR = 1, 2, 3, 4, 5
OP_NAMES = {HELLO: "HELLO", RESET: "RESET", STEP: "STEP", CLOSE: "CLOSE", ERROR: "ERROR"}

#: dtype names a spec may use (numpy names; all little-endian on the wire).
DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


#: The most any message may hold before the handshake fixed the sizes (a HELLO reply's spec,
#: an ERROR's text): bytes over all frames.
HANDSHAKE_MAX_BYTES = 1 << 20
#: Room beside the arrays in a bound derived from the spec (an ERROR's text, the header).
SLACK_BYTES = 64 << 10
#: The most frames a message of this version has (a STEP reply: header + 4).
MAX_FRAMES = 5
#: Specs beyond these are refused as absurd (a dimension count, elements of one array).
MAX_NDIM, MAX_ELEMENTS = 32, 1 << 40
#: The largest ``n`` of a discrete action (or entry of a multidiscrete one).
MAX_ACTIONS = (1 << 31) - 1


class SimulationError(RuntimeError):
    """An external simulation failed or broke the protocol; the message names it and says how.

    Defined in this leaf module so that :class:`ProtocolError` is one: every way a simulation
    can fail reaches the actor layer as one family, which it counts as a fault of the env.

    ``log``: the file the simulation's output went to, when mtrl launched it (set by the link
    that raised), so a report can quote its last line and say where the rest is.
    """

    log: Any = None


class ProtocolError(SimulationError):
    """A message that does not follow the protocol (bad magic, version, op, sizes or spec)."""


@dataclass(frozen=True)
class Header:
    """Frame 0 of every message."""

    op: int
    seq: int
    count: int = 0
    arg: int = 0
    version: int = PROTOCOL_VERSION

    def pack(self) -> bytes:
        return HEADER.pack(MAGIC, self.version, self.op, self.seq, self.count, self.arg)

    @classmethod
    def unpack(cls, frame: bytes | memoryview) -> Header:
        if len(frame) != HEADER.size:
            raise ProtocolError(f"header frame has {len(frame)} bytes, expected {HEADER.size}")
        magic, version, op, seq, count, arg = HEADER.unpack(frame)
        if magic != MAGIC:
            raise ProtocolError(f"bad magic {magic!r} (expected {MAGIC!r}): not an mtrl peer")
        if version != PROTOCOL_VERSION:
            raise ProtocolError(
                f"peer speaks coupling protocol version {version}, this side {PROTOCOL_VERSION}"
            )
        if op not in OP_NAMES:
            raise ProtocolError(f"unknown op {op}")
        return cls(op, seq, count, arg, version)


@dataclass(frozen=True)
class ArraySpec:
    """A ``Box``-like array of one copy: dtype, shape, bounds (None = unbounded)."""

    dtype: np.dtype
    shape: tuple[int, ...]
    low: Any = None
    high: Any = None

    @property
    def nbytes(self) -> int:
        """Bytes of one copy's array on the wire."""
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass(frozen=True)
class SimSpec:
    """What a simulation declares in its HELLO reply (docs/COUPLING.md, "The spec")."""

    observation: ArraySpec
    action_kind: str  # "box" | "discrete" | "multidiscrete"
    action: ArraySpec  # box: dtype/shape/bounds; discrete: int64 (); multidiscrete: int64 (k,)
    action_n: Any = None  # discrete: n; multidiscrete: list of n per entry
    max_episode_steps: int | None = None
    name: str = ""
    raw: dict[str, Any] | None = None


def reply_bytes(spec: SimSpec, num_envs: int) -> int:
    """The most bytes a reply may hold once the handshake fixed the sizes: a STEP reply for
    ``num_envs`` copies (observations, rewards, both flags) plus :data:`SLACK_BYTES`."""
    return HEADER.size + num_envs * (spec.observation.nbytes + 4 + 1 + 1) + SLACK_BYTES


def _show(v: Any) -> str:
    """``repr(v)``, cut short: a hostile spec must not make a megabyte error message."""
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any, default: float, where: str) -> float:
    if v is None:
        return default
    if isinstance(v, str) and v.strip().lower() in ("inf", "+inf", "-inf", "infinity", "-infinity"):
        return float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise ProtocolError(f"{where} must hold numbers, null or 'inf'/'-inf', got {_show(v)}")
    return float(v)


def _bound(value: Any, default: float, shape: tuple[int, ...], where: str) -> Any:
    if not isinstance(value, list):
        return _number(value, default, where)
    size = math.prod(shape)
    if len(value) != size:
        raise ProtocolError(f"{where} has {len(value)} entries; the shape {shape} has {size}")
    return np.array([_number(v, default, where) for v in value]).reshape(shape)


def _array_spec(d: dict[str, Any], where: str) -> ArraySpec:
    dtype = d.get("dtype", "float32")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ProtocolError(f"{where}.dtype must be one of {DTYPES}, got {_show(dtype)}")
    shape = d.get("shape")
    if not isinstance(shape, list) or not all(_is_int(s) and s > 0 for s in shape):
        raise ProtocolError(f"{where}.shape must be a list of positive ints, got {_show(shape)}")
    if len(shape) > MAX_NDIM or math.prod(shape) > MAX_ELEMENTS:
        raise ProtocolError(f"{where}.shape {_show(shape)} is absurdly large")
    shape_t = tuple(shape)
    low = _bound(d.get("low"), -np.inf, shape_t, f"{where}.low")
    high = _bound(d.get("high"), np.inf, shape_t, f"{where}.high")
    if np.any(np.asarray(low) > np.asarray(high)):
        raise ProtocolError(f"{where}.low must not exceed {where}.high")
    if np.dtype(dtype).kind in "iu":  # within what the dtype holds, as floats that convert back
        info = np.iinfo(dtype)
        top = float(info.max)
        if int(top) > info.max:  # int64: float64 rounds its max up, past it
            top = float(np.nextafter(top, 0.0))
        low, high = np.clip(low, info.min, top), np.clip(high, info.min, top)
    return ArraySpec(np.dtype(dtype).newbyteorder("<"), shape_t, low, high)


def parse_spec(text: bytes | str) -> SimSpec:
    """Parse and check the JSON spec of a HELLO reply."""
    try:
        d = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ProtocolError(f"the HELLO reply's spec is not valid JSON: {e}") from None
    if not isinstance(d, dict):
        raise ProtocolError("the HELLO reply's spec must be a JSON object")
    obs = d.get("observation")
    act = d.get("action")
    if not isinstance(obs, dict) or not isinstance(act, dict):
        raise ProtocolError("the spec needs 'observation' and 'action' objects")
    kind = act.get("type", "box")
    if kind == "box":
        action, n = _array_spec(act, "action"), None
    elif kind == "discrete":
        n = act.get("n")
        if not _is_int(n) or not 1 <= n <= MAX_ACTIONS:
            raise ProtocolError(f"action.n must be an int in 1..{MAX_ACTIONS}, got {_show(n)}")
        action = ArraySpec(np.dtype("<i8"), ())
    elif kind == "multidiscrete":
        n = act.get("nvec")
        ok = isinstance(n, list) and 0 < len(n) <= MAX_ELEMENTS
        if not ok or not all(_is_int(v) and 1 <= v <= MAX_ACTIONS for v in n):
            raise ProtocolError(
                f"action.nvec must be a list of ints in 1..{MAX_ACTIONS}, got {_show(n)}"
            )
        action = ArraySpec(np.dtype("<i8"), (len(n),))
    else:
        raise ProtocolError(
            f"action.type must be box, discrete or multidiscrete, got {_show(kind)}"
        )
    limit = d.get("max_episode_steps")
    if limit is not None and (not _is_int(limit) or limit < 1):
        raise ProtocolError(f"max_episode_steps must be a positive int or null, got {_show(limit)}")
    return SimSpec(
        observation=_array_spec(obs, "observation"),
        action_kind=kind,
        action=action,
        action_n=n,
        max_episode_steps=limit,
        name=str(d.get("name", "")),
        raw=d,
    )


def spec_json(
    observation: dict[str, Any],
    action: dict[str, Any],
    *,
    max_episode_steps: int | None = None,
    name: str = "",
) -> bytes:
    """The JSON spec a simulation sends (the Python client's helper; C codes write it by hand)."""

    def clean(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return [clean(x) for x in v.tolist()]
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, float) and not np.isfinite(v):
            return None
        return v

    doc = {
        "protocol": PROTOCOL_VERSION,
        "name": name,
        "observation": {k: clean(v) for k, v in observation.items()},
        "action": {k: clean(v) for k, v in action.items()},
        "max_episode_steps": max_episode_steps,
    }
    return json.dumps(doc).encode()
