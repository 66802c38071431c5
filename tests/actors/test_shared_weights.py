"""Weights in shared memory (local inference): a reader loads exactly what was published, any
dtype, only when newer; a reader racing a writer in another process never keeps a mix of two
versions; a write that never settles is an error, not a hang."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest
import torch

from mtrl.actors import shared_weights
from mtrl.actors.shared_weights import SharedWeights, WeightsLayout, WeightsReader

pytestmark = pytest.mark.timeout(120)


class _Net(torch.nn.Module):
    """Parameters in two dtypes and an integer buffer, as a real model's state may hold."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(5, 3)
        self.b = torch.nn.Parameter(torch.zeros(4, 2, dtype=torch.bfloat16))
        self.register_buffer("count", torch.zeros(2, dtype=torch.int64))

    def fill(self, value: float) -> _Net:
        with torch.no_grad():
            for t in self.state_dict().values():
                t.fill_(value)
        return self


def _values(model: torch.nn.Module) -> set[float]:
    return {float(v) for t in model.state_dict().values() for v in t.flatten().tolist()}


def test_a_reader_loads_what_was_published_only_when_newer() -> None:
    net = _Net()
    torch.manual_seed(1)
    src = _Net()
    with torch.no_grad():
        src.b.copy_(torch.randn(4, 2))
        src.count += 7
    weights = SharedWeights(net)
    reader = WeightsReader(weights.layout)
    try:
        dst = _Net().fill(-1.0)
        assert reader.load(dst, 0) == 0, "version 0 is not newer than 0"
        assert _values(dst) == {-1.0}
        weights.publish(src, 3)
        assert reader.newer_than(2) and not reader.newer_than(3)
        assert reader.load(dst, 0) == 3
        for name, t in src.state_dict().items():
            assert torch.equal(dst.state_dict()[name], t), name
        assert dst.b.dtype == torch.bfloat16 and dst.count.tolist() == [7, 7]
        weights.publish(_Net().fill(2.0), 4)
        assert reader.load(dst, 5) == 5 and _values(dst) != {2.0}, "older than ours: kept"
    finally:
        reader.close()
        weights.close()


LOADS_WANTED = 150
"""Loads the racing reader makes before it stops: it waits for that many, however slowly a
loaded machine runs it, rather than reading for a fixed time."""


def _read_until(layout: WeightsLayout, want: int, loads: mp.Value) -> None:  # type: ignore[valid-type]
    """A reader in its own process: loads newer versions until it has made ``want`` loads (or
    a minute has passed); exits 1 if it ever kept a mix."""
    reader, dst, version = WeightsReader(layout), _Net(), 0
    deadline = time.monotonic() + 60.0
    while loads.value < want and time.monotonic() < deadline:
        if reader.newer_than(version):
            version = reader.load(dst, version)
            loads.value += 1
            # bf16 holds integers up to 256 exactly: every tensor says the same version.
            if _values(dst) != {float(version % 200)}:
                raise SystemExit(1)
    reader.close()


def test_a_reader_racing_a_writer_never_keeps_a_mix_of_versions() -> None:
    ctx = mp.get_context("spawn")
    weights = SharedWeights(_Net())
    loads = ctx.Value("l", 0)
    proc = ctx.Process(target=_read_until, args=(weights.layout, LOADS_WANTED, loads), daemon=True)
    proc.start()
    net, v = _Net(), 0
    try:
        while proc.is_alive():  # version v: every tensor filled with v
            v += 1
            weights.publish(net.fill(float(v % 200)), v)
        proc.join(timeout=10)
    finally:
        weights.close()
    assert proc.exitcode == 0, "the reader kept a torn copy"
    assert loads.value >= LOADS_WANTED, "the reader loaded while the writer kept writing"
    assert v >= loads.value, "every load was of a newer version"


def test_a_write_that_never_settles_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_weights, "SETTLE_TIMEOUT_S", 0.2)
    weights = SharedWeights(_Net())
    reader = WeightsReader(weights.layout)
    try:
        weights.publish(_Net().fill(1.0), 1)
        weights.arena.arrays["seq"][0] += 1  # a writer that died between its two stores
        with pytest.raises(RuntimeError, match="did not settle"):
            reader.load(_Net(), 0)
    finally:
        reader.close()
        weights.close()
