"""Per-task learner diagnostics summed over a logging window.

One update's figures are noisy; the trainer logs their means over every update since its last
record. :class:`DiagnosticWindow` keeps those sums (:mod:`mtrl.algorithms.impala.diagnostics` makes
them) and turns sums into the ``learner/<task>/<figure>`` metrics.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mtrl.algorithms.impala import diagnostics

__all__ = ["DiagnosticWindow"]


class DiagnosticWindow:
    """Per-task diagnostic sums (float64 ``[K, len(FIELDS)]``) and torso-gradient shares
    (``[K]`` with a count of the updates that measured them) since the last :meth:`pop`."""

    def __init__(self, task_names: Sequence[str], gaussian: Sequence[bool]) -> None:
        self.task_names = list(task_names)
        self.gaussian = list(gaussian)
        k = len(self.task_names)
        self.sums = torch.zeros(k, len(diagnostics.FIELDS), dtype=torch.float64)
        self.share_sums = torch.zeros(k, dtype=torch.float64)
        self.share_count = 0

    def add(self, diag: torch.Tensor, shares: Sequence[float] | None) -> None:
        """One update's sums (on the CPU) and, when it measured them, its torso shares."""
        self.sums += diag
        if shares is not None:
            self.share_sums += torch.tensor(shares, dtype=torch.float64)
            self.share_count += 1

    def metrics(
        self, diag: torch.Tensor, shares: Sequence[float] | torch.Tensor | None
    ) -> dict[str, float]:
        """``learner/<task>/<figure>`` from per-task diagnostic sums and torso shares."""
        out: dict[str, float] = {}
        for i, name in enumerate(self.task_names):
            for key, value in diagnostics.task_means(diag[i], self.gaussian[i]).items():
                out[f"learner/{name}/{key}"] = value
            if shares is not None and diag[i, 0] > 0:
                out[f"learner/{name}/torso_grad_share"] = float(shares[i])
        return out

    def pop(self) -> dict[str, float]:
        """The means over the window, then start a new one."""
        shares = self.share_sums / self.share_count if self.share_count else None
        out = self.metrics(self.sums, shares)
        self.sums.zero_()
        self.share_sums.zero_()
        self.share_count = 0
        return out
