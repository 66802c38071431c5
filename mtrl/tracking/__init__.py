"""Tracking: run directories, metric sinks (files, wandb, console), plots. Nothing of the
training path is imported here.

A *record* is a flat dict of numbers written every ``tracking.log_every_s``. Metric names
follow CleanRL's namespaces so dashboards and tools recognise them:

* ``charts/env_steps`` (the x-axis everywhere), ``charts/elapsed_s``, ``charts/sps``,
  ``charts/updates``, ``charts/policy_lag``, ``charts/policy_lag_max``;
* ``losses/total``, ``losses/policy``, ``losses/value``, ``losses/entropy``,
  ``losses/grad_norm``;
* per task ``<id>`` (its config name): ``task/<id>/return`` (mean of recent episodes,
  unscaled), ``task/<id>/normalized_score``, ``task/<id>/episode_length``,
  ``task/<id>/episodes``, ``task/<id>/env_steps``, ``task/<id>/faults``,
  ``task/<id>/quarantined`` (0/1); ``popart/<id>/mu``, ``popart/<id>/sigma``;
  ``scheduler/<id>/actors``; ``learner/<id>/<figure>`` (the learner's diagnostics:
  ``entropy``, ``kl``, ``rho``, ...); in the last record only, ``eval/<id>/greedy_return``
  (the final greedy evaluation, ``tracking.final_eval_episodes``).

Besides the records, ``episodes.csv`` in the run directory holds every finished episode (task,
its env steps, return, length, wall seconds; :mod:`mtrl.tracking.episodes`), fed through
:meth:`SinkGroup.add_episodes` to the sinks that take episodes (:class:`EpisodeSink`).

Sinks share the :class:`Sink` protocol (``write(record)``, ``close()``). Trackers make them:
the built-in ones (the files above, wandb, TensorBoard; :mod:`mtrl.tracking.builtin`) register
through the hook ``mtrl_register_trackers`` as plugins' trackers do; :func:`tracker_factories`
picks a run's trackers from the registry and :func:`make_sinks` starts them, console last.
"""

from mtrl.tracking.factory import builtin_trackers, make_sinks, tracker_factories
from mtrl.tracking.sinks import EpisodeSink, JsonlSink, Sink, SinkGroup, TrackerFactory

__all__ = [
    "EpisodeSink",
    "JsonlSink",
    "Sink",
    "SinkGroup",
    "TrackerFactory",
    "builtin_trackers",
    "make_sinks",
    "tracker_factories",
]
