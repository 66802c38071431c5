""" "Did you mean …?" messages for unknown names (env ids, trackers, scheduling policies).

Pure functions over strings, shared by config validation (:mod:`mtrl.config`) and the plugin
registries (:mod:`mtrl.plugins`); kept apart so that the config layer never imports the plugin
layer.
"""

from __future__ import annotations

import difflib
from typing import Any

#: What an unknown-tracker message lists when no plugin registered a tracker.
NO_TRACKERS = "(none installed)"


def unknown_name_message(noun: str, name: str, known: Any, none: str = "(none)") -> str:
    """``unknown <noun> 'balanced2'; did you mean 'balanced'?`` (or the list of known names)."""
    known = sorted(known)
    hint = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    msg = f"unknown {noun} {name!r}"
    if hint:
        return f"{msg}; did you mean {hint[0]!r}?"
    return f"{msg}; known: {', '.join(known) or none}"


def unknown_tracker_message(name: str, known: Any) -> str:
    """``unknown tracker 'mlflw'; did you mean 'mlflow'?`` (or the list of known names)."""
    return unknown_name_message("tracker", name, known, NO_TRACKERS)


def suggest_env_ids(env_id: str, known: Any, n: int = 3) -> list[str]:
    """Closest known ids: by the whole id, and by the name when the namespace was left out."""
    known = list(known)
    hits = difflib.get_close_matches(env_id, known, n=n, cutoff=0.85)
    by_name: dict[str, list[str]] = {}
    for k in known:
        by_name.setdefault(k.split("/", 1)[-1].lower(), []).append(k)
    exact = by_name.get(env_id.lower(), [])
    close_names = difflib.get_close_matches(env_id.lower(), list(by_name), n=n, cutoff=0.75)
    for name in close_names:
        for k in by_name[name]:
            if k not in hits:
                hits.append(k)
    return list(dict.fromkeys(exact + hits))[:n]


def unknown_env_message(env_id: str, known: Any) -> str:
    """``unknown env id 'CartPole'; did you mean 'gymnasium/CartPole-v1'?`` (or where to look)."""
    hint = suggest_env_ids(env_id, known)
    msg = f"unknown env id {env_id!r}"
    if hint:
        msg += "; did you mean " + " or ".join(repr(h) for h in hint) + "?"
    else:
        msg += "; `mtrl envs` lists the ids of installed plugins"
    return msg


#: Env namespaces whose plugin lives in a venv of its own (its pins clash with the main
#: venv's), and where to find it: an unknown id of one of them is most likely that, not a typo.
OWN_VENV_NAMESPACES = {
    "metaworld": (
        "Meta-World's envs live in their own venv (Meta-World pins MuJoCo 3.3.0): "
        "`bash scripts/metaworld_tests.sh` builds .venv-metaworld; run this config with "
        ".venv-metaworld/bin/mtrl"
    ),
    "pufferlib": (
        "PufferLib's envs live in their own venv: `bash scripts/pufferlib_tests.sh` builds "
        "benchmarks/peers/.venvs/pufferlib_ocean; run this config with its bin/mtrl"
    ),
}


def own_venv_hints(env_ids: Any) -> list[str]:
    """One hint per own-venv namespace (:data:`OWN_VENV_NAMESPACES`) among ``env_ids``
    (unknown ids), in first-seen order: ten Meta-World tasks get one line, not ten."""
    spaces = dict.fromkeys(str(e).split("/", 1)[0] for e in env_ids if "/" in str(e))
    return [OWN_VENV_NAMESPACES[s] for s in spaces if s in OWN_VENV_NAMESPACES]
