"""SAC's per-task diagnostics window: each task's temperature, policy entropy, Q and |TD|
averaged over the gradient steps that sampled it since the last record (kept on the learner's
device, read once per record)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["FIELDS", "SacDiagnostics"]

#: Per-task means kept (``learner/<task>/<name>``).
FIELDS = ("alpha", "entropy", "q", "td_error")


class SacDiagnostics:
    """Sums of per-task step means, and how many steps sampled each task."""

    def __init__(self, task_names: Sequence[str], device: torch.device) -> None:
        self.task_names = list(task_names)
        self.sums = torch.zeros(
            len(task_names), len(FIELDS) + 1, dtype=torch.float64, device=device
        )

    def record(
        self,
        rows: torch.Tensor,
        count: torch.Tensor,
        alpha: torch.Tensor,
        entropy: torch.Tensor,
        q: torch.Tensor,
        td: torch.Tensor,
    ) -> None:
        """Add one gradient step: ``rows`` names each sample's task, ``count`` the samples of
        each task ``[K]``; ``alpha`` is per task, ``entropy``, ``q``, ``td`` per sample."""
        sums = torch.zeros(len(alpha), 3, device=alpha.device)
        sums.index_add_(0, rows, torch.stack([entropy, q, td], dim=1))
        self.add(count, alpha, sums)

    def add(self, count: torch.Tensor, alpha: torch.Tensor, sums: torch.Tensor) -> None:
        """Add one gradient step from per-task sums: ``count`` samples of each task ``[K]``,
        its temperature ``alpha [K]`` and its samples' summed entropy, Q and |TD| ``[K, 3]``."""
        present = (count > 0).unsqueeze(1)  # a mask, not boolean indexing (no host sync)
        means = torch.cat([alpha.unsqueeze(1), sums / count.clamp(min=1).unsqueeze(1)], dim=1)
        self.sums[:, : len(FIELDS)] += torch.where(present, means, 0.0).double()
        self.sums[:, len(FIELDS) :] += present.double()

    def pop(self) -> dict[str, float]:
        """``learner/<task>/<field>`` means since the last call (tasks sampled since)."""
        diag = self.sums.to("cpu", copy=True)  # .cpu() of a CPU tensor is itself
        self.sums.zero_()
        out: dict[str, float] = {}
        for k, name in enumerate(self.task_names):
            steps = float(diag[k, len(FIELDS)])
            if steps:
                for i, field in enumerate(FIELDS):
                    out[f"learner/{name}/{field}"] = float(diag[k, i]) / steps
        return out
