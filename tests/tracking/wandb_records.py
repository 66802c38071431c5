"""Read the records of a local wandb run file (``run-<id>.wandb``) without the network.

The file is wandb's transaction log: a 7-byte header (``:W&B``, magic, version), then
LevelDB-log framed chunks (crc32, length, type; 32 KiB blocks) each holding a serialised
``wandb.proto.wandb_internal_pb2.Record``. Enough of the format to check what was logged.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError
from wandb.proto import wandb_internal_pb2 as pb

_HEADER, _BLOCK, _CHUNK = 7, 32 * 1024, 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def read_records(path: Path) -> list[Any]:
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb run file"
    pos, buf, records = _HEADER, b"", []
    while pos + _CHUNK <= len(data):
        room = _BLOCK - pos % _BLOCK
        if room < _CHUNK:  # block trailer padding
            pos += room
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + _CHUNK])
        pos += _CHUNK
        if (kind == 0 and length == 0) or pos + length > len(data):
            break  # end of the log, or a chunk wandb-core is still writing
        buf += data[pos : pos + length]
        pos += length
        if kind in (_FULL, _LAST):
            rec = pb.Record()
            rec.ParseFromString(buf)
            records.append(rec)
            buf = b""
    return records


def read_finished(path: Path, timeout_s: float = 30.0) -> list[Any]:
    """The records once the run's ``exit`` record is on disk (wandb-core writes in the
    background; under load the tail can land a moment after ``finish`` returns, and a read
    can catch a chunk half-written)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            records = read_records(path)
        except DecodeError:  # a chunk caught half-written: read again
            records = []
        if any(r.WhichOneof("record_type") == "exit" for r in records):
            return records
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: no exit record after {timeout_s} s")
        time.sleep(0.05)


def history(records: list[Any]) -> list[dict[str, Any]]:
    """Logged rows, user keys only, values decoded from JSON."""
    rows = []
    for r in records:
        if r.WhichOneof("record_type") == "history":
            row = {
                i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item
            }
            rows.append({k: v for k, v in row.items() if not k.startswith("_")})
    return rows


def run_config(records: list[Any]) -> dict[str, Any]:
    """The run's config as given to ``wandb.init`` (plus later updates)."""
    out: dict[str, Any] = {}
    for r in records:
        kind = r.WhichOneof("record_type")
        updates = (
            r.run.config.update if kind == "run" else (r.config.update if kind == "config" else [])
        )
        for u in updates:
            key = u.key or "/".join(u.nested_key)
            if key != "_wandb":
                out[key] = json.loads(u.value_json)
    return out


def step_metrics(records: list[Any]) -> dict[str, str]:
    """``define_metric`` glob/name → its step metric."""
    out = {}
    for r in records:
        if r.WhichOneof("record_type") == "metric":
            m = r.metric
            out[m.glob_name or m.name] = m.step_metric
    return out
