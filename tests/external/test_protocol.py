"""The wire format: headers and the handshake's spec (docs/COUPLING.md)."""

from __future__ import annotations

import numpy as np
import pytest

from mtrl.coupling import protocol as P
from mtrl.plugins.external import spaces_from_spec


def test_header_round_trips_and_is_24_little_endian_bytes() -> None:
    h = P.Header(P.HELLO, seq=7, count=3, arg=-5)
    raw = h.pack()
    assert len(raw) == 24 and raw[:4] == b"MTRL"
    assert raw[4:6] == b"\x01\x00" and raw[6:8] == b"\x01\x00" and raw[8:12] == b"\x07\0\0\0"
    assert P.Header.unpack(raw) == h


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"XXXX" + bytes(20), "bad magic"),
        (P.HEADER.pack(b"MTRL", 2, 1, 0, 0, 0), "version 2"),
        (P.HEADER.pack(b"MTRL", 1, 99, 0, 0, 0), "unknown op"),
        (b"MTRL", "24"),
    ],
)
def test_bad_headers_are_rejected_with_a_reason(raw: bytes, match: str) -> None:
    with pytest.raises(P.ProtocolError, match=match):
        P.Header.unpack(raw)


def test_spec_gives_gymnasium_spaces() -> None:
    spec = P.parse_spec(
        P.spec_json(
            {"dtype": "uint8", "shape": [3, 4], "high": 10},
            {"type": "multidiscrete", "nvec": [2, 3]},
            max_episode_steps=50,
        )
    )
    obs, act = spaces_from_spec(spec)
    assert obs.shape == (3, 4) and obs.dtype == np.uint8 and obs.high.max() == 10
    assert obs.low.min() == 0
    assert list(act.nvec) == [2, 3] and spec.max_episode_steps == 50
    box = P.parse_spec(
        b'{"observation": {"shape": [2], "low": [null, -1]}, "action": '
        b'{"type": "discrete", "n": 4}}'
    )
    obs, act = spaces_from_spec(box)
    assert obs.dtype == np.float32 and obs.low[0] == -np.inf and obs.low[1] == -1
    assert act.n == 4


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        (b"{", "not valid JSON"),
        (b'{"observation": {"shape": [2]}}', "'observation' and 'action'"),
        (b'{"observation": {"shape": [0]}, "action": {"shape": [1]}}', "positive ints"),
        (
            b'{"observation": {"shape": [1], "dtype": "complex64"}, "action": {"shape": [1]}}',
            "dtype",
        ),
        (b'{"observation": {"shape": [1]}, "action": {"type": "tuple"}}', "action.type"),
    ],
)
def test_bad_specs_are_rejected_with_a_reason(doc: bytes, match: str) -> None:
    with pytest.raises(P.ProtocolError, match=match):
        P.parse_spec(doc)
