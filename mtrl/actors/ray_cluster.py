"""Joining (or starting) the Ray cluster of ``actors.mode: ray``, and reading its resources.

The only other module that imports Ray is :mod:`mtrl.actors.ray_pool`; both import it lazily,
so Ray stays an optional extra (``pip install 'mtrl[ray]'``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

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


def ray_mode_problems(cfg: Any, source: str) -> list[str]:
    """What ``mtrl validate`` says of a config's Ray settings: ``mode: ray`` without Ray
    installed (a problem: ``train`` would refuse it)."""
    if cfg.actors.mode != "ray":
        return []
    try:
        import_ray()
    except UserError as e:
        return [f"{source}: actors.mode: {e}"]
    return []


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
    machine. A process already connected (a notebook, a test's cluster) keeps its session."""
    ray = import_ray()
    if ray.is_initialized():
        return RaySession(_gcs_address(ray), owned=False, joined=False)
    address = cfg.address or os.environ.get("RAY_ADDRESS") or None
    common = dict(namespace=cfg.namespace, log_to_driver=True, configure_logging=False)
    if address is not None:
        try:
            ray.init(address=address, **common)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise UserError(
                f"actors.ray.address: cannot join the Ray cluster at {address!r}: {e}"
            ) from None
        return RaySession(_gcs_address(ray), owned=False, joined=True)
    # address="local": always a new Ray of this run's own; without it ray.init joins any
    # cluster started on this machine (`ray start --head` writes /tmp/ray/ray_current_cluster).
    ray.init(address="local", num_cpus=cfg.num_cpus, include_dashboard=False, **common)
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
    ray = import_ray()
    return float(sum(n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")))


def this_node() -> str:
    """Id of the node this process runs on (connected to the cluster)."""
    return str(import_ray().get_runtime_context().get_node_id())


def alive_nodes() -> set[str]:
    """Ids of the cluster's live nodes."""
    return {n["NodeID"] for n in import_ray().nodes() if n.get("Alive")}


def missing_resources(p: TaskPlacement) -> list[str]:
    """The resources of ``p`` that no live node has enough of (so its actors cannot start)."""
    ray = import_ray()
    need = {"CPU": p.num_cpus, **p.resources}
    if p.memory_mb is not None:
        need["memory"] = p.memory_mb * 2**20
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    if any(all(r.get(k, 0.0) >= v for k, v in need.items()) for r in nodes):
        return []
    return [
        f"{k}={v:g}" for k, v in need.items() if not any(r.get(k, 0.0) >= v for r in nodes)
    ] or ["no single node has all of " + ", ".join(f"{k}={v:g}" for k, v in need.items())]
