"""Thomas algorithm for constant-coefficient tridiagonal systems, batched over right-hand sides.

Implicit finite-difference schemes for the 1-D heat equation solve, every time step, the same
``n x n`` system ``A y = d`` with ``A = tridiag(lower, diag, upper)`` for every copy of the
environment. :class:`ConstantTridiagonal` computes Thomas' forward-elimination coefficients once;
:meth:`~ConstantTridiagonal.solve` then sweeps the grid once forward and once backward, each
sweep step a vector operation across all right-hand sides (copies). The cost is ``O(n)`` Python
iterations of ``O(m)`` numpy work, so it grows linearly with the grid size ``n``.

Thomas' algorithm needs no pivoting when ``A`` is diagonally dominant, which holds for every
matrix built here (``|diag| >= |lower| + |upper|``, strictly for the time-stepping matrices).
"""

from __future__ import annotations

import numpy as np


class ConstantTridiagonal:
    """LU factors of ``tridiag(lower, diag, upper)`` of size ``n``, reused for every solve."""

    def __init__(self, n: int, lower: float, diag: float, upper: float) -> None:
        if n < 1:
            raise ValueError(f"system size must be >= 1, got {n}")
        if abs(diag) < abs(lower) + abs(upper):
            raise ValueError(
                f"tridiag({lower}, {diag}, {upper}) is not diagonally dominant; Thomas' "
                "algorithm without pivoting may be unstable"
            )
        self.n = n
        self.lower, self.diag, self.upper = float(lower), float(diag), float(upper)
        # c'[j] = upper / (diag - lower c'[j-1]);  inv[j] = 1 / (diag - lower c'[j-1])
        inv = np.empty(n)
        cprime = np.empty(n)
        c_prev = 0.0
        for j in range(n):
            inv[j] = 1.0 / (diag - lower * c_prev)
            c_prev = cprime[j] = upper * inv[j]
        self._inv = inv
        self._cprime = cprime

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """Solve ``A y = rhs`` in place for ``rhs`` of shape ``(n,)`` or ``(n, m)``; returns it.

        Column ``k`` of ``rhs`` is an independent right-hand side (one environment copy).
        """
        if rhs.shape[0] != self.n:
            raise ValueError(f"rhs has {rhs.shape[0]} rows, the system has {self.n}")
        y, inv, cp, a = rhs, self._inv, self._cprime, self.lower
        y[0] *= inv[0]
        for j in range(1, self.n):  # forward elimination: y[j] = (d[j] - a y[j-1]) / denom[j]
            y[j] -= a * y[j - 1]
            y[j] *= inv[j]
        for j in range(self.n - 2, -1, -1):  # back substitution: y[j] -= c'[j] y[j+1]
            y[j] -= cp[j] * y[j + 1]
        return y

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``A @ x`` for checking solutions (``x`` of shape ``(n,)`` or ``(n, m)``)."""
        out = self.diag * x
        out[1:] += self.lower * x[:-1]
        out[:-1] += self.upper * x[1:]
        return out
