"""The shipped road network and its demand: a 3 x 3 grid of signalised intersections.

``python -m mtrl_sumo.network`` regenerates the files under ``data/`` with SUMO's own
``netgenerate`` (the shipped ones were made by it; regenerate after a SUMO upgrade changes the
net format). Two nets of the same roads differ only in their signal programs:

- ``grid3x3.net.xml``: SUMO's default **fixed-time** program for each intersection (42 s green
  per axis, 3 s yellow, 90 s cycle). The RL task drives these signals; the ``fixed`` controller
  leaves them alone.
- ``grid3x3_actuated.net.xml``: SUMO's **actuated** program (gap-based: a green lasts 5-50 s
  and ends when detectors see no more arrivals), the ``actuated`` controller.

Roads: 200 m blocks, 2 lanes each way, 200 m feeder roads at the fringe (12 entries and exits).
Demand (``grid3x3.rou.xml``, flows of Bernoulli arrivals drawn by SUMO's ``--seed``) shifts
half-way: for the first ``PERIOD`` seconds the north-south corridors carry ``HEAVY`` vehicles per
second per entry and the east-west ones ``LIGHT``; then the other way round. Every entry also
sends ``TURNING`` vehicles per second to each exit on a perpendicular side, so vehicles turn at
the intersections. A fixed-time plan that splits green evenly wastes green on the light axis.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
SIZE = 3  # intersections per side
PERIOD = 900  # seconds of each demand pattern
HEAVY, LIGHT, TURNING = 0.16, 0.04, 0.01  # vehicles per second per entry (per exit for TURNING)

NETGENERATE = [
    "--grid", "--grid.number", str(SIZE), "--grid.length", "200", "--grid.attach-length", "200",
    "--default.lanenumber", "2", "--default-junction-type", "priority",
]  # fmt: skip


def intersections() -> list[str]:
    """Ids of the signalised junctions, column letter then row: A0 ... C2."""
    return [f"{chr(ord('A') + x)}{y}" for x in range(SIZE) for y in range(SIZE)]


def net_file(controller: str) -> Path:
    """The net of a controller: the actuated programs for ``actuated``, fixed-time otherwise."""
    return DATA / ("grid3x3_actuated.net.xml" if controller == "actuated" else "grid3x3.net.xml")


def route_file() -> Path:
    return DATA / "grid3x3.rou.xml"


def _corridors() -> list[tuple[str, str, str]]:
    """(axis, entry edge, exit edge) of every straight corridor, both directions."""
    last, out = SIZE - 1, []
    for i in range(SIZE):
        col = chr(ord("A") + i)
        out.append(("ns", f"bottom{i}{col}0", f"{col}{last}top{i}"))
        out.append(("ns", f"top{i}{col}{last}", f"{col}0bottom{i}"))
        left, right = "A", chr(ord("A") + last)
        out.append(("ew", f"left{i}{left}{i}", f"{right}{i}right{i}"))
        out.append(("ew", f"right{i}{right}{i}", f"{left}{i}left{i}"))
    return out


def routes_xml() -> str:
    """The demand: straight flows whose rates swap between the axes after ``PERIOD`` seconds,
    plus light turning flows from every entry to every exit of the perpendicular sides."""
    corridors = _corridors()
    lines = [
        "<routes>",
        '    <vType id="car" accel="2.6" decel="4.5" sigma="0.5" length="5" minGap="2.5" '
        'maxSpeed="13.89"/>',
    ]
    for period, heavy_axis in enumerate(("ns", "ew")):
        begin, end = period * PERIOD, (period + 1) * PERIOD
        for k, (axis, entry, exit_) in enumerate(corridors):
            rate = HEAVY if axis == heavy_axis else LIGHT
            lines.append(
                f'    <flow id="p{period}_straight{k}" type="car" begin="{begin}" end="{end}" '
                f'probability="{rate}" from="{entry}" to="{exit_}" departLane="best" '
                'departSpeed="max"/>'
            )
            for m, (other_axis, _, other_exit) in enumerate(corridors):
                if other_axis != axis:
                    lines.append(
                        f'    <flow id="p{period}_turn{k}_{m}" type="car" begin="{begin}" '
                        f'end="{end}" probability="{TURNING}" from="{entry}" to="{other_exit}" '
                        'departLane="best" departSpeed="max"/>'
                    )
    lines.append("</routes>")
    # SUMO wants flows sorted by departure time.
    body = sorted(lines[2:-1], key=lambda s: int(s.split('begin="')[1].split('"')[0]))
    return "\n".join([*lines[:2], *body, lines[-1]]) + "\n"


def generate(out: Path = DATA) -> list[Path]:
    """Write both nets (with ``netgenerate`` from the ``eclipse-sumo`` wheel) and the demand."""
    from sumo import SUMO_HOME

    binary = Path(SUMO_HOME) / "bin" / "netgenerate"
    tls = ["--tls.set", ",".join(intersections())]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for controller, kind in (("fixed", "static"), ("actuated", "actuated")):
        path = out / net_file(controller).name
        cmd = [str(binary), *NETGENERATE, *tls, "--tls.default-type", kind, "-o", str(path)]
        subprocess.run(cmd, check=True, capture_output=True)
        written.append(path)
    path = out / route_file().name
    path.write_text(routes_xml())
    written.append(path)
    return written


if __name__ == "__main__":
    for p in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA):
        print(p)
