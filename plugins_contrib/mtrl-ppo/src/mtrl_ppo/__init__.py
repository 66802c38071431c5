"""Proximal Policy Optimization (Schulman et al. 2017) as an mtrl learning rule offered by a
plugin: ``learner.algorithm: ppo``, its settings in ``learner.ppo:``.

Built from mtrl's public parts only (the multi-task model, PopArt, the optimiser and its
schedule), as any third party would: :mod:`mtrl_ppo.losses` holds the math as pure functions,
:mod:`mtrl_ppo.samples` turns a batch of unrolls into shuffled minibatches,
:mod:`mtrl_ppo.learner` is the :class:`~mtrl.learner.protocol.Learner`, and
:mod:`mtrl_ppo.plugin` registers it.
"""

from mtrl_ppo.settings import PpoSettings

__all__ = ["PpoSettings"]
