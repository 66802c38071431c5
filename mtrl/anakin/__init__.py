"""Anakin (Podracer): tensor-native envs on the learner's device; rollout and update there.

Vocabulary:

* :class:`AnakinRunner` — one task's :class:`~mtrl.plugins.builtin.tensor_envs.base.
  TensorBatchEnv` and its rollout; ``collect(model, version) -> TaskBatch`` on the device,
  ``env_steps``, ``episodes.drain()``. The same shape as the Sebulba runners, so a trainer can
  hold both kinds and feed their batches to one
  :class:`~mtrl.algorithms.impala.learner.ImpalaLearner` update.
* :func:`anakin_train_step` — collect from every Anakin runner, then one learner update.
* :class:`DeviceEpisodeTracker` — episode returns and lengths kept on the device.

Imports plugins and learner, nothing above them.
"""

from mtrl.anakin.episodes import DeviceEpisodeTracker
from mtrl.anakin.loop import anakin_train_step, train_anakin
from mtrl.anakin.runner import AnakinRunner

__all__ = ["AnakinRunner", "DeviceEpisodeTracker", "anakin_train_step", "train_anakin"]
