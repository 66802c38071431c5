"""Joining (or starting) the Ray cluster of ``actors.mode: ray``, and reading its resources.

The only other module that imports Ray is :mod:`mtrl.actors.ray_pool`; both import it lazily,
so Ray stays an optional extra (``pip install 'mtrl[ray]'``).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from mtrl.actors.ray_embedded import embedded_start
from mtrl.actors.ray_join import join
from mtrl.actors.ray_placement import NodeResources, embedded_nodes, unfit_placements
from mtrl.config.placement import RayConfig, TaskPlacement
from mtrl.errors import UserError

RAY_EXTRA_HINT = "actors.mode: ray needs Ray: pip install 'mtrl[ray]'"


def import_ray() -> Any:
    """The ``ray`` module, or a :class:`UserError` naming the extra to install."""
    try:
        import ray
    except ImportError as e:
        raise UserError(f"{RAY_EXTRA_HINT} ({type(e).__name__}: {e})") from None
    return ray


def ray_mode_problems(cfg: Any, source: str, cluster: bool = False) -> list[str]:
    """What ``mtrl validate`` says of a config's Ray settings: ``mode: ray`` without Ray
    installed (``train`` would refuse it), and task placements no node could host one actor
    of (``train`` refuses them too): checked against the embedded Ray's one node always, and
    against a cluster to join (``actors.ray.address``, ``RAY_ADDRESS``) when ``cluster``
    (``validate --check-envs``: it joins the cluster for a moment)."""
    if cfg.actors.mode != "ray":
        return []
    try:
        import_ray()
    except UserError as e:
        return [f"{source}: actors.mode: {e}"]
    rc = cfg.actors.ray
    address = rc.address or os.environ.get("RAY_ADDRESS") or None
    if address is None:
        nodes = embedded_nodes(rc.num_cpus)
        where = f"the embedded Ray ({nodes[0]['CPU']:g} CPUs: actors.ray.num_cpus or all cores)"
    elif not cluster:
        return []
    else:
        try:
            session = connect(rc)
        except UserError as e:
            return [f"{source}: {e}"]
        try:
            nodes = live_nodes()
        finally:
            session.close()
        where = f"the Ray cluster at {address}"
    names = [None if t.anakin else t.key for t in cfg.tasks]
    placements = [t.placement for t in cfg.tasks]
    return [f"{source}: {p}" for p in unfit_placements(placements, names, nodes, where)]


def placement_notes(cfg: Any) -> list[str]:
    """Warnings: a task placement or Ray setting that the config's actor mode ignores."""
    mode = cfg.actors.mode
    if mode == "ray":
        return []
    default = TaskPlacement()
    notes = [
        f"tasks[{i}].placement is only used with actors.mode: ray (mode is {mode})"
        for i, t in enumerate(cfg.tasks)
        if t.placement != default
    ]
    if cfg.actors.ray != RayConfig():
        notes.append(f"actors.ray is only used with actors.mode: ray (mode is {mode})")
    return notes


@dataclass
class RaySession:
    """The cluster this run talks to; ``owned`` when the run started it (then it stops it)."""

    address: str
    owned: bool
    joined: bool  # this call connected (False: the process was already connected)

    def close(self) -> None:
        """Disconnect when this run connected; an embedded Ray stops with it."""
        if self.joined:
            import_ray().shutdown()


def connect(cfg: RayConfig) -> RaySession:
    """Join ``cfg.address`` (or ``RAY_ADDRESS``); with neither, start an embedded Ray on this
    machine, reachable on loopback only. A process already connected (a notebook, a test's
    cluster) keeps its session."""
    ray = import_ray()
    if ray.is_initialized():
        return RaySession(_gcs_address(ray), owned=False, joined=False)
    address = cfg.address or os.environ.get("RAY_ADDRESS") or None
    common = dict(namespace=cfg.namespace, log_to_driver=True, configure_logging=False)
    if address is not None:
        source = "actors.ray.address" if cfg.address else "RAY_ADDRESS"
        join(ray, address, source, **common)
        return RaySession(_gcs_address(ray), owned=False, joined=True)
    # address="local": always a new Ray of this run's own; without it ray.init joins any
    # cluster started on this machine (`ray start --head` writes /tmp/ray/ray_current_cluster).
    with embedded_start(ray) as loopback:
        ray.init(
            address="local", num_cpus=cfg.num_cpus, include_dashboard=False, **loopback, **common
        )
    return RaySession(_gcs_address(ray), owned=True, joined=True)


def _gcs_address(ray: Any) -> str:
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:
        return "?"


def actor_options(p: TaskPlacement) -> dict[str, Any]:
    """``ray.remote(...).options`` for one actor of a task placed by ``p``."""
    opts: dict[str, Any] = {"num_cpus": p.num_cpus, "max_restarts": 0, "max_task_retries": 0}
    if p.memory_mb is not None:
        opts["memory"] = p.memory_mb * 2**20
    if p.resources:
        opts["resources"] = dict(p.resources)
    return opts


def cluster_cpus() -> float:
    """CPUs of the live nodes of the cluster (changes as nodes join and leave)."""
    return float(sum(n.get("CPU", 0.0) for n in live_nodes()))


def this_node() -> str:
    """Id of the node this process runs on (connected to the cluster)."""
    return str(import_ray().get_runtime_context().get_node_id())


def alive_nodes() -> set[str]:
    """Ids of the cluster's live nodes."""
    return {n["NodeID"] for n in import_ray().nodes() if n.get("Alive")}


def node_answers(node_id: str, timeout_s: float = 2.0) -> bool:
    """Whether node ``node_id`` is alive in the cluster's view *and* its raylet accepts a
    connection now. A node killed outright (its machine gone, its processes SIGKILLed) stops
    answering at once, but the cluster marks it dead only after its health checks have failed
    for a while, longer on a loaded head; the connection tells the two apart without waiting."""
    node = next((n for n in import_ray().nodes() if n["NodeID"] == node_id), None)
    if node is None or not node.get("Alive"):
        return False
    try:
        address = (node["NodeManagerAddress"], int(node["NodeManagerPort"]))
        with socket.create_connection(address, timeout=timeout_s):
            return True
    except (KeyError, ValueError, OSError):  # refused, unreachable, timed out
        return False


def live_nodes_by_id() -> dict[str, NodeResources]:
    """The resources of the cluster's live nodes by node id."""
    return {n["NodeID"]: dict(n["Resources"]) for n in import_ray().nodes() if n.get("Alive")}


def lost_actor_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors of a call to an actor that is gone (killed, or lost with its node)."""
    ex = ray.exceptions
    return tuple(
        getattr(ex, n) for n in ("RayActorError", "ActorUnavailableError") if hasattr(ex, n)
    )


def live_nodes() -> list[NodeResources]:
    """The resources of the cluster's live nodes (``CPU``, ``memory``, custom ones)."""
    return [dict(n["Resources"]) for n in import_ray().nodes() if n.get("Alive")]
