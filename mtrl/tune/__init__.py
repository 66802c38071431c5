"""``mtrl tune``: population-based training of mtrl runs on Ray Tune (docs/TUNE.md).

:mod:`mtrl.tune.space` turns a config's ``tune.search`` into Ray Tune's search space and back
into each member's config; :mod:`mtrl.tune.member` is one member (a Ray Tune trainable that
trains an interval, checkpoints and reports); :mod:`mtrl.tune.runner` runs the population.
"""
