"""Can the Ray cluster host a task's actors, and why a task got none: placements checked
against the nodes' resources.

Two failures this turns into words. A placement no live node could ever fit (more CPUs,
memory or custom resources per actor than any one node offers) is refused before training
(:func:`unfit_placements`: ``mtrl validate`` and the pool's start). A task whose actors all
wait for room for longer than ``actors.ray.starved_warning_s`` (the cluster has fewer CPUs than
the run's actors ask for, or the node that had its resources left) gets one warning naming the
cause and the fix (:class:`StarveWatch`, :func:`starved_message`). A shortfall already plain
when the run starts its actors (they ask for more CPUs than the cluster has) is said then,
naming each task left without an actor (:func:`unplaced_tasks`, :func:`no_room_message`), and
the final table gives the reason in a few words (:func:`no_actor_reason`). Nothing here
imports Ray: the cluster is read by the callers as :class:`NodeResources`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from mtrl.config.placement import TaskPlacement

#: A live node's resources as Ray reports them: ``CPU``, ``memory`` (bytes), custom ones.
NodeResources = dict[str, float]


def actor_needs(p: TaskPlacement) -> dict[str, float]:
    """What one actor of a task placed by ``p`` reserves, in Ray's resource names."""
    need: dict[str, float] = {"CPU": p.num_cpus, **p.resources}
    if p.memory_mb is not None:
        need["memory"] = p.memory_mb * 2**20
    return need


def _fmt(key: str, value: float) -> str:
    """One resource as the placement field that asks for it: ``num_cpus=4``, ``sim_b=1``."""
    if key == "memory":
        return f"memory_mb={value / 2**20:g}"
    return f"num_cpus={value:g}" if key == "CPU" else f"{key}={value:g}"


def _unmet(p: TaskPlacement, nodes: Sequence[NodeResources]) -> list[tuple[str, float]] | None:
    """None when some node fits one actor of ``p``; else the resources no node has enough of
    (empty: each is somewhere, but no single node has all of them)."""
    need = actor_needs(p)
    if any(all(n.get(k, 0.0) >= v for k, v in need.items()) for n in nodes):
        return None
    return [(k, v) for k, v in need.items() if not any(n.get(k, 0.0) >= v for n in nodes)]


def missing_resources(p: TaskPlacement, nodes: Sequence[NodeResources]) -> list[str]:
    """The resources of ``p`` that no node of ``nodes`` has enough of for one actor (empty
    when some node fits it)."""
    unmet = _unmet(p, nodes)
    if unmet is None:
        return []
    all_of = ", ".join(_fmt(k, v) for k, v in actor_needs(p).items())
    return [_fmt(k, v) for k, v in unmet] or [f"no single node has all of {all_of}"]


def unfit_placements(
    placements: Sequence[TaskPlacement],
    names: Sequence[str | None],
    nodes: Sequence[NodeResources],
    where: str,
) -> list[str]:
    """One line per task (``names[i]`` not None) of which no node of ``nodes`` could host a
    single actor: what it asks, what the nodes have, what to change. ``where`` names the
    cluster (``the Ray cluster at HOST:PORT``)."""
    problems = []
    for i, (p, name) in enumerate(zip(placements, names, strict=True)):
        unmet = None if name is None else _unmet(p, nodes)
        if unmet is None:
            continue
        largest = {k: max((n.get(k, 0.0) for n in nodes), default=0.0) for k, _ in unmet}
        asks = "; ".join(
            f"{_fmt(k, v)} (largest node: {_fmt(k, largest[k]).split('=')[1]})" for k, v in unmet
        ) or "resources no single node has together: " + ", ".join(missing_resources(p, []))
        problems.append(
            f"tasks[{i}].placement: task {name!r} asks per actor {asks}, which no node of "
            f"{where} ({len(nodes)} live) can host: lower tasks[{i}].placement or add a node "
            "that has it (`ray start --num-cpus=N --resources='{\"NAME\": N}'`)"
        )
    return problems


def embedded_nodes(num_cpus: int | None) -> list[NodeResources]:
    """The one node an embedded Ray will have (``actors.ray.num_cpus``, or every core; all of
    the machine's memory as an upper bound; no custom resources), for ``mtrl validate``."""
    cpus = float(num_cpus or os.cpu_count() or 1)
    node: NodeResources = {"CPU": cpus}
    try:
        node["memory"] = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        node["memory"] = float("inf")
    return [node]


@dataclass
class StarveWatch:
    """When each task last had an actor running; which tasks have had none for longer than
    ``after_s`` (each said once until it has one again)."""

    after_s: float
    since: dict[int, float] = field(default_factory=dict)  # task -> first seen without one
    said: set[int] = field(default_factory=set)

    def starved(self, now: float, running: Sequence[int], wanted: Sequence[int]) -> list[int]:
        """Tasks that want actors (``wanted[i] > 0``) and have had none running for longer
        than ``after_s``, not said before (they are marked said)."""
        out = []
        for task, (run, want) in enumerate(zip(running, wanted, strict=True)):
            if run > 0 or want == 0:
                self.since.pop(task, None)
                self.said.discard(task)
                continue
            first = self.since.setdefault(task, now)
            if now - first > self.after_s and task not in self.said:
                self.said.add(task)
                out.append(task)
        return out


def unplaced_tasks(
    actors: Sequence[int], placements: Sequence[TaskPlacement], nodes: Sequence[NodeResources]
) -> list[int]:
    """Tasks that get no actor at all when the cluster cannot hold every actor asked for.

    ``actors``: each new actor's task, in the order the actors were created. Only when the
    actors ask for more of some resource than the live ``nodes`` have in all (so some must
    wait) are they placed in that order, each on the first node with room: Ray gives room to
    waiting actors in the order they were created, so the tasks this leaves without any actor
    are the ones that wait. Empty when everything fits."""
    asked: dict[str, float] = {}
    for task in actors:
        for k, v in actor_needs(placements[task]).items():
            asked[k] = asked.get(k, 0.0) + v
    if all(v <= sum(n.get(k, 0.0) for n in nodes) for k, v in asked.items()):
        return []
    free = [dict(n) for n in nodes]
    placed: set[int] = set()
    for task in actors:
        need = actor_needs(placements[task])
        for node in free:
            if all(node.get(k, 0.0) >= v for k, v in need.items()):
                for k, v in need.items():
                    node[k] -= v
                placed.add(task)
                break
    return sorted(set(actors) - placed)


def _cpu_shortfall(
    task: int,
    placements: Sequence[TaskPlacement],
    wanted: Sequence[int],
    nodes: Sequence[NodeResources],
) -> str | None:
    """How the run's actors outnumber the cluster's CPUs and what to change (None when they
    do not). ``wanted``: actors per task this run asks the cluster for."""
    cpus = sum(n.get("CPU", 0.0) for n in nodes)
    asked = sum(w * placements[i].num_cpus for i, w in enumerate(wanted))
    if asked <= cpus:
        return None
    actors = sum(wanted)
    fixes = ["give the cluster more CPUs (more nodes, or actors.ray.num_cpus for an embedded Ray)"]
    if actors > sum(w > 0 for w in wanted):  # more than the one actor each task gets at least
        fixes.append("lower scheduler.num_actors")
    share = int(cpus / actors * 100) / 100  # actors that share a CPU ask for a fraction of one
    if 0 < share < placements[task].num_cpus:
        fixes.append(
            f"lower placement.num_cpus (a fraction shares a CPU: {share:g} per actor fits all "
            f"{actors})"
        )
    fixes.append("train fewer tasks at once")
    per = placements[task].num_cpus
    return (
        f"the run's {actors} actors ask for {asked:g} CPUs and the Ray cluster has {cpus:g} on "
        f"{len(nodes)} node(s), so its {wanted[task]} actor(s) of {per:g} CPU(s) "
        f"(tasks[{task}].placement.num_cpus) wait for room — "
        + ", ".join(fixes[:-1])
        + f" or {fixes[-1]}"
    )


def no_room_message(
    task: int,
    name: str,
    placements: Sequence[TaskPlacement],
    wanted: Sequence[int],
    nodes: Sequence[NodeResources],
) -> str:
    """One line for the start of a run: task ``task`` gets no actor, because the run's actors
    ask for more than the cluster has (:func:`unplaced_tasks`), and what to change."""
    cause = _cpu_shortfall(task, placements, wanted, nodes) or (
        "the run's actors ask the Ray cluster for more than its nodes have (tasks[*].placement)"
        f", so its {wanted[task]} actor(s) wait for room — give the cluster more nodes, lower "
        "the placements or train fewer tasks at once"
    )
    return f"task {name!r} gets no actor: {cause}"


def no_actor_reason(
    task: int,
    placements: Sequence[TaskPlacement],
    wanted: Sequence[int],
    nodes: Sequence[NodeResources],
) -> str:
    """Why task ``task``'s actors have no node, in a few words (the final table's row)."""
    short = missing_resources(placements[task], nodes)
    if short:
        return f"no actor: no live node has {', '.join(short)}"
    cpus = sum(n.get("CPU", 0.0) for n in nodes)
    asked = sum(w * placements[i].num_cpus for i, w in enumerate(wanted))
    if asked > cpus:
        return (
            f"no actor: the run's {sum(wanted)} actors ask for {asked:g} CPUs, the Ray cluster "
            f"has {cpus:g}"
        )
    return "no actor: the nodes that fit its placement are busy with other work"


def starved_message(
    task: int,
    name: str,
    waited_s: float,
    placements: Sequence[TaskPlacement],
    wanted: Sequence[int],
    nodes: Sequence[NodeResources],
) -> str:
    """Why task ``task`` has no running actor after ``waited_s`` and what to change.
    ``wanted``: actors per task this run asks the cluster for (waiting ones included)."""
    head = (
        f"task {name!r} has had no running actor for {waited_s:.0f}s "
        f"(actors.ray.starved_warning_s): "
    )
    short = missing_resources(placements[task], nodes)
    if short:
        return head + (
            f"no live node has {', '.join(short)} (tasks[{task}].placement) — the node that "
            "had it left the cluster; start one again or change the placement"
        )
    shortfall = _cpu_shortfall(task, placements, wanted, nodes)
    if shortfall is not None:
        return head + shortfall
    cpus = sum(n.get("CPU", 0.0) for n in nodes)
    asked = sum(w * placements[i].num_cpus for i, w in enumerate(wanted))
    return head + (
        f"the run's {sum(wanted)} actors ask for {asked:g} of the cluster's {cpus:g} CPUs, but "
        "the nodes that fit its placement are busy with other work (another run's actors?) — "
        "free them or add a node"
    )
