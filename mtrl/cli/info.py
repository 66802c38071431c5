"""``mtrl plugins``, ``mtrl envs`` and ``mtrl schema``: what this installation offers (plugins,
env ids with their spaces, the config schema), read without training anything.

``--json`` prints JSON; otherwise the rows go to :mod:`mtrl.cli.tables` or
:mod:`mtrl.cli.env_table`, imported only then so that JSON output never imports rich.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mtrl.errors import UserError


def cmd_plugins(args: argparse.Namespace) -> int:
    """List plugins: name, status, version, package, hooks, envs, learning rules, scheduling
    policies and trackers offered, errors."""
    from mtrl.plugins import get_plugins

    infos = get_plugins().infos.values()
    if args.json:
        print(json.dumps([vars(i) for i in infos], indent=2))
        return 0
    from mtrl.cli.tables import print_plugins

    print_plugins(infos)
    return 0


def cmd_envs(args: argparse.Namespace) -> int:
    """List env ids with their single-copy observation and action spaces; ``--long`` adds each
    env's description, random/reference scores, time limit and library notes."""
    from mtrl.plugins import get_plugins
    from mtrl.plugins.describe import describe_env

    plugins = get_plugins()
    if args.plugin and args.plugin not in plugins.infos:
        raise UserError(
            f"--plugin: no plugin named {args.plugin!r}; installed: {', '.join(plugins.infos)}"
        )
    if args.plugin and not plugins.envs.ids(args.plugin) and plugins.failure_note(args.plugin):
        raise UserError(f"--plugin: {plugins.failure_note(args.plugin)}")
    specs = [s for s in plugins.envs if not args.plugin or s.plugin == args.plugin]
    if args.match:
        specs = [s for s in specs if args.match.lower() in s.id.lower()]
    if args.ids_only:
        rows = [{"id": s.id, "plugin": s.plugin} for s in specs]
    else:  # an env that cannot build gets an "error", its warnings become "notes"
        rows = [describe_env(s, long=args.long) for s in specs]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif args.ids_only:
        print("\n".join(r["id"] for r in rows))
    elif args.long:
        from mtrl.cli.env_table import print_env_details

        print_env_details(rows)
    else:
        from mtrl.cli.tables import print_envs

        print_envs(rows)
        noted = sum("notes" in r for r in rows)
        print(
            "--long adds each env's description, random/reference scores and time limit"
            + (f", and the notes of {noted} env(s)" if noted else "")
        )
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """Print (or write) the JSON Schema of experiment configs, with the installed plugin
    trackers' ``tracking.<name>:`` sections and learning rules' ``learner.<name>:`` ones."""
    from mtrl.config import config_schema
    from mtrl.plugins import get_plugins

    plugins = get_plugins()
    schema = config_schema(plugins.trackers.settings_models(), plugins.algorithms.settings_models())
    text = json.dumps(schema, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
        print(f"wrote {args.output}")
    else:
        print(text)
    return 0
