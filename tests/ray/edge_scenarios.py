"""Ray scenarios at the network edge and at the cluster's limits, each run in its own process
in a private network namespace by :func:`ray_netns.run_scenario` (``script=EDGE``): where the
embedded Ray listens, a cluster that requires a token, placements no node can host, a task
the cluster has no room for. ``python edge_scenarios.py NAME '{"kwarg": ...}'`` as
scenarios.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scenarios import main  # tests/ray/, the script's own folder

#: An address on loopback that is not 127.0.0.1, with the default route through it: Ray,
#: left alone, takes it for the machine's address (as it would a real interface's).
OUTSIDE_LOOKING = "10.77.0.2"


def _listening() -> list[str]:
    """The local addresses of this network namespace's listening TCP sockets."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state != "0A":  # LISTEN
                continue
            host = bytes.fromhex(local.split(":")[0])
            if len(host) == 4:
                out.append(socket.inet_ntop(socket.AF_INET, host[::-1]))
            else:  # four little-endian 32-bit words
                words = b"".join(host[i : i + 4][::-1] for i in range(0, 16, 4))
                out.append(socket.inet_ntop(socket.AF_INET6, words))
    return out


def embedded_ray_listens_on_loopback() -> dict[str, Any]:
    """mtrl's embedded Ray on a machine whose default route has an address besides loopback:
    the GCS address it reports and every listening socket's address."""
    subprocess.run(["ip", "addr", "add", f"{OUTSIDE_LOOKING}/32", "dev", "lo"], check=True)
    subprocess.run(
        ["ip", "route", "add", "default", "dev", "lo", "src", OUTSIDE_LOOKING], check=True
    )
    from mtrl.actors.ray_cluster import connect
    from mtrl.config.placement import RayConfig

    session = connect(RayConfig(num_cpus=1))
    try:
        listening = _listening()
    finally:
        session.close()
    return {"gcs": session.address, "listening": sorted(set(listening))}


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> dict[str, Any]:
    """``mtrl ARGS`` in a subprocess: exit status, stdout and stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "mtrl.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    return {"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr}


def tiny_config(tmp: str, name: str, extra: str = "", total: int = 4000) -> str:
    """A CartPole run of ``total`` env steps with Ray actors, written to ``tmp/name.yaml``."""
    path = Path(tmp) / f"{name}.yaml"
    path.write_text(
        f"""
name: {name}
total_env_steps: {total}
tasks:
  - {{env: gymnasium/CartPole-v1, name: cart, num_envs: 4}}
actors: {{mode: ray}}
scheduler: {{num_actors: 1}}
learner: {{unroll_length: 16, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
checkpoint: {{enabled: false}}
tracking: {{run_dir: {tmp}/runs, console: plain, log_every_s: 1, csv: false,
            wandb: {{mode: disabled}}}}
{extra}"""
    )
    return str(path)


def unfit_placement_is_refused(tmp: str) -> dict[str, Any]:
    """``mtrl train`` of tasks no node of its embedded Ray (2 CPUs) could host: num_cpus 4,
    and a custom resource no node has."""
    out = {}
    for key, placement in {
        "cpus": "{num_cpus: 4}",
        "resource": "{resources: {solver_x: 1}}",
    }.items():
        cfg = tiny_config(tmp, key)
        text = (
            Path(cfg)
            .read_text()
            .replace(
                "name: cart, num_envs: 4}", f"name: cart, num_envs: 4, placement: {placement}}}"
            )
        )
        Path(cfg).write_text(text.replace("actors: {mode: ray}", RAY_2_CPUS))
        out[key] = _cli("train", cfg)
    return out


RAY_2_CPUS = "actors: {mode: ray, ray: {num_cpus: 2}}"


def starved_task_is_warned(deadline_s: float = 600.0) -> dict[str, Any]:
    """Three tasks of one actor each on an embedded Ray of 2 CPUs: one actor never gets a
    node. The run goes on until the warning is printed (at the start, or after
    ``starved_warning_s`` for a task the start did not name), and 5 s more (or
    ``deadline_s``)."""
    from mtrl.config import parse_config
    from mtrl.train.trainer import Trainer

    cfg = parse_config(
        """
total_env_steps: 100000000
tasks:
  - {env: gymnasium/CartPole-v1, name: a, num_envs: 4}
  - {env: gymnasium/CartPole-v1, name: b, num_envs: 4}
  - {env: gymnasium/CartPole-v1, name: c, num_envs: 4}
actors: {mode: ray, ray: {num_cpus: 2, starved_warning_s: 15}}
scheduler: {num_actors: 3}
learner: {unroll_length: 16, batch_size: 8, model: {encoder_dim: 16, torso: [16]}}
checkpoint: {enabled: false}
tracking: {console: quiet, csv: false, wandb: {mode: disabled}}
"""
    )
    printed = io.StringIO()
    end = time.monotonic() + deadline_s

    class UntilWarned(Trainer):
        def on_unroll(self, task: int, info: Any) -> None:
            # One more check after the warning: a second one must not follow.
            # Wait until the two tasks that fit have delivered (a busy machine can take longer
            # than the warning's 15 s to start one) and the one left is warned.
            starved = [t for t, p in enumerate(self.progress) if p.env_steps == 0]
            out = printed.getvalue()
            said = [
                f"task {self.names[t]!r} has had no" in out
                or f"task {self.names[t]!r} gets no actor" in out
                for t in starved
            ]
            now = time.monotonic()
            if len(starved) == 1 and all(said):
                self.said_at = getattr(self, "said_at", now)
            if now - getattr(self, "said_at", now) > 5 or now > end:
                self.request_stop()

    with contextlib.redirect_stdout(printed):
        trainer = UntilWarned(cfg, write_run_dir=False, console=False)
        try:
            result = trainer.run()
        finally:
            trainer.close()
    text = printed.getvalue()
    print(text[-4000:])
    return {
        "warnings": [
            ln
            for ln in text.splitlines()
            if "has had no running actor" in ln or "gets no actor" in ln
        ],
        "steps": {t.name: t.env_steps for t in result.tasks},
    }


def no_room_is_said_at_the_start(tmp: str) -> dict[str, Any]:
    """``mtrl train`` of three tasks of one actor each on an embedded Ray of 2 CPUs, a run of
    a few seconds (far short of ``starved_warning_s``): its output, wide enough that the final
    table keeps each row on one line."""
    cfg = tiny_config(tmp, "three", total=3000)
    text = (
        Path(cfg)
        .read_text()
        .replace(
            "  - {env: gymnasium/CartPole-v1, name: cart, num_envs: 4}\n",
            "".join(f"  - {{env: gymnasium/CartPole-v1, name: {n}, num_envs: 4}}\n" for n in "abc"),
        )
    )
    text = text.replace("actors: {mode: ray}", RAY_2_CPUS).replace("num_actors: 1", "num_actors: 3")
    Path(cfg).write_text(text)
    return _cli("train", cfg, env=dict(os.environ, COLUMNS="300"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, head: subprocess.Popen, deadline_s: float = 600.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        assert head.poll() is None, "ray start --head exited"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on {port} after {deadline_s:g}s")


def _wait_for_cpus(env: dict[str, str], address: str, deadline_s: float = 600.0) -> None:
    """Until the cluster's raylet has registered (its CPUs are offered)."""
    probe = (
        "import ray, time, sys\n"
        f"ray.init(address={address!r}, log_to_driver=False)\n"
        f"end = time.monotonic() + {deadline_s}\n"
        "while ray.cluster_resources().get('CPU', 0) < 1 and time.monotonic() < end:\n"
        "    time.sleep(0.5)\n"
        "sys.exit(0 if ray.cluster_resources().get('CPU', 0) >= 1 else 1)\n"
    )
    subprocess.run([sys.executable, "-c", probe], env=env, check=True, timeout=deadline_s + 60)


def token_cluster_is_joined(tmp: str) -> dict[str, Any]:
    """A cluster started by hand with token authentication (``RAY_AUTH_MODE=token``, the
    token in a file): ``mtrl train`` with the token joins it and trains; without the token,
    or with another one, it stops at once with one line naming authentication."""
    token_file = Path(tmp) / "auth_token"
    token_file.write_text(secrets.token_hex(32))
    home = Path(tmp) / "home"  # no ~/.ray/auth_token of this machine's user is read or written
    home.mkdir()
    port = _free_port()
    address = f"127.0.0.1:{port}"
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    base.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0")
    auth = dict(base, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_file))
    ray_cli = str(Path(sys.executable).with_name("ray"))
    head_args = [f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=2"]
    head = subprocess.Popen(
        [ray_cli, "start", "--head", *head_args, "--include-dashboard=false", "--block"],
        env=auth,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: stopped with it below
    )
    cfg = tiny_config(tmp, "token", total=4000)
    try:
        _wait_for_port(port, head)
        _wait_for_cpus(auth, address)
        joined = _cli("train", cfg, env=dict(auth, RAY_ADDRESS=address))
        no_mode = _cli("train", cfg, env=dict(base, RAY_ADDRESS=address))
        wrong = _cli(
            "train",
            cfg,
            env=dict(base, RAY_ADDRESS=address, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * 64),
        )
        big = tiny_config(tmp, "big", extra="")
        Path(big).write_text(Path(big).read_text().replace("num_envs: 4}", BIG_PLACEMENT))
        validate = _cli("validate", "--check-envs", big, env=dict(auth, RAY_ADDRESS=address))
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # `ray start --block` stops its processes
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
    (run_dir,) = (Path(tmp) / "runs").iterdir()
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    out = {"joined": joined, "no_mode": no_mode, "wrong": wrong, "validate": validate}
    return {"updates": last["charts/updates"], **out}


#: A placement no node of the 2-CPU test clusters can host.
BIG_PLACEMENT = "num_envs: 4, placement: {num_cpus: 4}}"


if __name__ == "__main__":
    main(globals())
