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


class ProtocolError(RuntimeError):
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
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


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


def _bound(value: Any, default: float) -> Any:
    if value is None:
        return default
    if isinstance(value, str):
        return float(value)  # "inf" / "-inf"
    if isinstance(value, list):
        return np.array([default if v is None else float(v) for v in value])
    return float(value)


def _array_spec(d: dict[str, Any], where: str) -> ArraySpec:
    dtype = d.get("dtype", "float32")
    if dtype not in DTYPES:
        raise ProtocolError(f"{where}.dtype must be one of {DTYPES}, got {dtype!r}")
    shape = d.get("shape")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s > 0 for s in shape):
        raise ProtocolError(f"{where}.shape must be a list of positive ints, got {shape!r}")
    return ArraySpec(
        np.dtype(dtype).newbyteorder("<"),
        tuple(shape),
        _bound(d.get("low"), -np.inf),
        _bound(d.get("high"), np.inf),
    )


def parse_spec(text: bytes | str) -> SimSpec:
    """Parse and check the JSON spec of a HELLO reply."""
    try:
        d = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f"the HELLO reply's spec is not valid JSON: {e}") from e
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
        if not isinstance(n, int) or n < 1:
            raise ProtocolError(f"action.n must be a positive int, got {n!r}")
        action = ArraySpec(np.dtype("<i8"), ())
    elif kind == "multidiscrete":
        n = act.get("nvec")
        if not isinstance(n, list) or not n or not all(isinstance(v, int) and v > 0 for v in n):
            raise ProtocolError(f"action.nvec must be a list of positive ints, got {n!r}")
        action = ArraySpec(np.dtype("<i8"), (len(n),))
    else:
        raise ProtocolError(f"action.type must be box, discrete or multidiscrete, got {kind!r}")
    limit = d.get("max_episode_steps")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ProtocolError(f"max_episode_steps must be a positive int or null, got {limit!r}")
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
