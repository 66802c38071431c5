"""Ray Tune's own resume hint, kept out of ``mtrl tune``'s output.

Interrupted, Ray Tune logs ``Resume experiment with: Tuner.restore(path=..., trainable=...)``
— Python a user of ``mtrl tune`` has no use for, printed before mtrl's own line (``continue
with: mtrl tune CONFIG --dir DIR --resume``). :func:`without_restore_hint` drops that one
record of Ray Tune's logger while a population runs; every other line of Ray's stays.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["RAY_TUNE_LOGGER", "without_restore_hint"]

#: The logger Ray Tune's ``run`` writes the hint to (``ray/tune/tune.py``).
RAY_TUNE_LOGGER = "ray.tune.tune"


class _NoRestoreHint(logging.Filter):
    """Drops the records that tell the user to call ``Tuner.restore``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Tuner.restore(" not in record.getMessage()


@contextlib.contextmanager
def without_restore_hint() -> Iterator[None]:
    """Within the block, Ray Tune's ``Tuner.restore(...)`` hint is not logged."""
    logger = logging.getLogger(RAY_TUNE_LOGGER)
    hint = _NoRestoreHint()
    logger.addFilter(hint)
    try:
        yield
    finally:
        logger.removeFilter(hint)
