"""The resolved config as MLflow params and records as MLflow metrics: flat, within MLflow's
limits on names and values."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

#: MLflow's longest param value (3.x; older servers take 500: values are cut to fit).
MAX_PARAM_VALUE = 6000
#: Characters MLflow accepts in a metric or param name; any other becomes ``_``.
_NAME_BAD = re.compile(r"[^\w./\- :]")


def flatten(data: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted key, text)`` for every leaf of ``data`` (mappings by key, lists by index:
    ``tasks.0.env``); an empty mapping or list is one leaf."""
    if isinstance(data, Mapping) and data:
        for key, value in data.items():
            yield from flatten(value, f"{prefix}{key}.")
    elif isinstance(data, list | tuple) and data:
        for i, value in enumerate(data):
            yield from flatten(value, f"{prefix}{i}.")
    else:
        text = "None" if data is None else str(data)
        yield clean_name(prefix[:-1]), text[:MAX_PARAM_VALUE]


def clean_name(name: str) -> str:
    """``name`` with characters MLflow refuses in keys replaced by ``_``."""
    return _NAME_BAD.sub("_", name)


def file_store_name(name: str) -> str:
    """``name`` as MLflow's file store can keep it: that store writes each metric to a file at
    the path its name spells, so ``task/x/faults`` and ``task/x/faults/raise`` cannot both be
    (a file and a folder of one name); with ``/`` as ``.`` every name is one file."""
    return name.replace("/", ".")


def metric_values(record: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """``(name, value)`` for every numeric entry of a metrics record (bools as 0/1; text and
    non-finite values left out: MLflow's stores disagree on NaN and infinities)."""
    for key, value in record.items():
        if isinstance(value, bool):
            value = float(value)
        if isinstance(value, int | float) and math.isfinite(value):
            yield clean_name(str(key)), float(value)
