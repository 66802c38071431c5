"""A samples-per-insert ratio held between inserts and draws: Reverb's rate limiter.

``diff = inserts * samples_per_insert - samples`` is how far the draws lag behind the ratio.
An insert is allowed while the replay holds fewer than ``min_size_to_sample`` items or while,
after it, ``diff <= min_size * spi + error_buffer``; a draw of ``n`` is allowed once the replay
holds ``min_size_to_sample`` items and, after it, ``diff >= min_size * spi - error_buffer``.
So ``samples`` stays within ``error_buffer`` of ``spi * (inserts - min_size)``: the ratio
``samples / inserts`` tends to ``spi`` as inserts grow (Cassirer et al. 2021, "Reverb").

Pure bookkeeping (no clock, no Ray): the caller asks, waits on what it waits for, and records.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RateLimiter"]


@dataclass
class RateLimiter:
    """Counts of inserts and draws, and whether the next of either keeps the ratio."""

    samples_per_insert: float
    min_size_to_sample: int = 1
    error_buffer: float = 100.0
    inserts: int = 0
    samples: int = 0

    def __post_init__(self) -> None:
        if self.samples_per_insert <= 0 or self.min_size_to_sample < 1 or self.error_buffer <= 0:
            raise ValueError(
                "rate limiter: need samples_per_insert > 0, min_size_to_sample >= 1 and "
                f"error_buffer > 0; got {self.samples_per_insert}, {self.min_size_to_sample}, "
                f"{self.error_buffer}"
            )

    @property
    def _centre(self) -> float:
        return self.min_size_to_sample * self.samples_per_insert

    def diff(self, inserts: int | None = None, samples: int | None = None) -> float:
        """``inserts * spi - samples`` (now, or for the counts given)."""
        i = self.inserts if inserts is None else inserts
        s = self.samples if samples is None else samples
        return i * self.samples_per_insert - s

    def can_insert(self, n: int = 1) -> bool:
        """Whether inserting ``n`` items keeps the draws within the buffer of the ratio."""
        after = self.inserts + n
        if after <= self.min_size_to_sample:
            return True
        return self.diff(inserts=after) <= self._centre + self.error_buffer

    def can_sample(self, n: int = 1) -> bool:
        """Whether drawing ``n`` items keeps the draws within the buffer of the ratio."""
        if self.inserts < self.min_size_to_sample:
            return False
        return self.diff(samples=self.samples + n) >= self._centre - self.error_buffer

    def inserted(self, n: int) -> None:
        self.inserts += int(n)

    def sampled(self, n: int) -> None:
        self.samples += int(n)

    @property
    def ratio(self) -> float:
        """Samples per insert so far (0 before the first insert)."""
        return self.samples / self.inserts if self.inserts else 0.0
