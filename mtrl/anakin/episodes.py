"""Episode statistics kept on the device: finished returns and lengths, synced only on drain.

Finished episodes are written into a fixed ring buffer with a scatter whose positions come from
a cumulative sum of the done flags, so recording never asks the host how many episodes ended.
"""

from __future__ import annotations

import torch

#: smallest ring; :class:`DeviceEpisodeTracker` holds at least this many finished episodes.
MIN_CAPACITY = 1 << 16


def accumulate(
    running_return: torch.Tensor,
    running_length: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    valid: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Add one step's raw rewards (reset steps, ``valid`` false, add nothing).

    Returns ``(episode_return, episode_length, running_return, running_length)``: the first two
    are each copy's totals up to this step (what :meth:`DeviceEpisodeTracker.record` takes where
    ``done``), the last two the running totals for the next step (zero where ``done``).
    """
    ret = running_return + torch.where(valid, reward.to(running_return.dtype), 0.0)
    length = running_length + valid.long()
    return ret, length, torch.where(done, 0.0, ret), torch.where(done, 0, length)


class DeviceEpisodeTracker:
    """Per-copy unscaled returns and lengths on ``device``; reset steps are not counted.

    Same numbers as :class:`mtrl.actors.episodes.EpisodeTracker`. Between two :meth:`drain`
    calls it keeps the most recent ``capacity`` finished episodes (older ones are dropped and
    counted in :attr:`dropped`).
    """

    def __init__(self, num_envs: int, device: torch.device, capacity: int = MIN_CAPACITY) -> None:
        # float64 sums, as the numpy tracker; mps has no float64.
        self.dtype = torch.float32 if device.type == "mps" else torch.float64
        self.capacity = max(int(capacity), 1)
        self.running_return = torch.zeros(num_envs, dtype=self.dtype, device=device)
        self.running_length = torch.zeros(num_envs, dtype=torch.int64, device=device)
        # Slot `capacity` is a sink for the scatter's non-finished entries.
        self._returns = torch.zeros(self.capacity + 1, dtype=self.dtype, device=device)
        self._lengths = torch.zeros(self.capacity + 1, dtype=torch.int64, device=device)
        self._written = torch.zeros((), dtype=torch.int64, device=device)
        self._drained = 0
        self.dropped = 0

    def record(self, done: torch.Tensor, returns: torch.Tensor, lengths: torch.Tensor) -> None:
        """Write the episodes that ended (``done``, time-major ``[T, N]``) into the ring, in order.

        Raises nothing and syncs nothing; more than ``capacity`` endings in one call keep an
        arbitrary subset of them.
        """
        flat = done.reshape(-1)
        order = torch.cumsum(flat.long(), 0)
        slot = torch.where(flat, (self._written + order - 1) % self.capacity, self.capacity)
        self._returns.scatter_(0, slot, returns.reshape(-1).to(self.dtype))
        self._lengths.scatter_(0, slot, lengths.reshape(-1).long())
        self._written += order[-1]

    def drain(self) -> tuple[list[float], list[int], list[bool]]:
        """Finished episodes since the last drain, oldest first (the one host sync): returns,
        lengths and success flags (none: tensor-native envs report no success)."""
        written = int(self._written)
        n = written - self._drained
        if n > self.capacity:
            self.dropped += n - self.capacity
            n = self.capacity
        self._drained = written
        if n == 0:
            return [], [], []
        idx = torch.arange(written - n, written, device=self._written.device) % self.capacity
        return self._returns[idx].tolist(), self._lengths[idx].tolist(), []
