"""Config of ``actors.mode: ray``: where the Ray cluster is, and what each task's actors need.

Kept apart from :mod:`mtrl.config.models` (which imports it) so the Ray-specific fields read as
one unit; nothing here imports Ray. See docs/DISTRIBUTED.md.
"""

from __future__ import annotations

from pydantic import Field, PositiveFloat, PositiveInt

from mtrl.config.base import ConfigModel


class TaskPlacement(ConfigModel):
    """What one actor of a task reserves on a Ray node (``actors.mode: ray`` only; the other
    modes run every actor on this machine and ignore it)."""

    num_cpus: PositiveFloat = 1.0
    """CPUs reserved per actor: a simulation that steps with 8 threads asks for 8."""
    memory_mb: PositiveInt | None = None
    """Memory reserved per actor (Ray's ``memory`` resource), in MiB; none by default."""
    resources: dict[str, PositiveFloat] = Field(default_factory=dict)
    """Ray custom resources per actor, e.g. ``{heat_code: 1}``: the actors go only to nodes
    started with that resource (``ray start --resources='{"heat_code": 8}'``), which is how a
    task is pinned to the nodes where its simulation is installed."""


class RayConfig(ConfigModel):
    """The Ray cluster the actors run on (``actors.mode: ray``)."""

    address: str | None = Field(default=None, min_length=1)
    """Cluster to join: ``auto``, ``host:port`` or ``ray://host:port``. Unset: the
    ``RAY_ADDRESS`` environment variable, else an embedded Ray on this machine, started for the
    run and stopped with it."""
    num_cpus: PositiveInt | None = None
    """Embedded Ray only: the CPUs it offers actors (default: every core of this machine)."""
    namespace: str = Field(default="mtrl", min_length=1)
    """Ray namespace of the run's actors."""
    budget_from_cluster: bool = False
    """Size the actor budget from the cluster instead of ``scheduler.num_actors``: at every
    rebalance, (cluster CPUs - ``reserve_cpus``) / the mean ``placement.num_cpus`` of the
    tasks, so nodes joining or leaving change how many actors the scheduler shares out."""
    reserve_cpus: float = Field(default=1.0, ge=0)
    """With ``budget_from_cluster``: CPUs of the cluster left to the learner and the driver."""
    starved_warning_s: float = Field(default=60.0, gt=0)
    """A task that wants actors and has had none placed on a node for this long gets one
    WARNING saying why (the cluster has fewer CPUs than the run's actors ask for, the node with
    its resources left) and what to change; said again only after it has had an actor."""
    local_actors: int = Field(default=0, ge=0)
    """Up to this many actors run on the learner's machine as process mode's worker processes
    (acting as ``actors.inference`` says: through the central inference server, or with their
    own policy copies loaded from shared memory) instead of as Ray actors; the others are Ray
    actors anywhere in the cluster. Tasks pinned by
    ``placement.resources`` always go to Ray. Count these cores out of the Ray node on the
    learner's machine (``ray start --num-cpus``, or ``num_cpus`` here for an embedded Ray);
    with ``budget_from_cluster`` they add to the budget. 0: every actor is a Ray actor."""
