"""Loading plugins: built-ins and entry points, each isolated so one broken plugin hurts no other.

Environment variables (read at load time, so spawned workers see the same registry):

* ``MTRL_DISABLE_PLUGIN_AUTOLOAD=1`` — load no entry-point plugins (built-ins still load);
* ``MTRL_PLUGINS=a,b`` — load only these entry-point plugins;
* ``MTRL_DISABLE_PLUGINS=a,b`` — skip these plugins, built-ins included.

Spawned worker processes do not inherit the parent's registry (gymnasium#222): they call
:func:`get_plugins` themselves, which rebuilds the same registry from the same environment.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Literal

import pluggy

from mtrl.errors import PluginUnavailable, UnknownEnvError
from mtrl.plugins import hookspecs
from mtrl.plugins.algorithm_registrar import AlgorithmRegistrar, AlgorithmRegistry
from mtrl.plugins.registrar import EnvRegistrar
from mtrl.plugins.scheduler_registrar import SchedulerRegistrar, SchedulerRegistry
from mtrl.plugins.spec import EnvRegistry, EnvSpec
from mtrl.plugins.tracker_registrar import TrackerRegistrar, TrackerRegistry

ENTRY_POINT_GROUP = "mtrl"
BUILTIN_PLUGINS: dict[str, str] = {
    "gymnasium": "mtrl.plugins.builtin.gymnasium_envs",
    "envpool": "mtrl.plugins.builtin.envpool_envs",
    "pettingzoo": "mtrl.plugins.builtin.pettingzoo_envs",
    "scheduler": "mtrl.scheduler.builtin",
    "algorithms": "mtrl.algorithms.builtin",
    "tracking": "mtrl.tracking.builtin",
    "tensor": "mtrl.plugins.builtin.tensor_envs",
    "chaos": "mtrl.plugins.builtin.chaos",
    "memory": "mtrl.plugins.builtin.memory_envs",
    "mission": "mtrl.plugins.builtin.mission_envs",
}
ENV_DISABLE_AUTOLOAD = "MTRL_DISABLE_PLUGIN_AUTOLOAD"
ENV_ONLY = "MTRL_PLUGINS"
ENV_DISABLE = "MTRL_DISABLE_PLUGINS"

Status = Literal["ok", "error", "unavailable", "disabled"]
_IMPORTLIB_DIR = os.path.dirname(importlib.__file__)


def _package_dir(name: str) -> str | None:
    """Where an installed package lives (None: not installed), without importing it."""
    spec = importlib.util.find_spec(name)
    return os.path.dirname(spec.origin) if spec is not None and spec.origin else None


#: Loader frames that say nothing about a failed plugin: importlib's, and the
#: ``importlib_metadata`` backport's where a package installs it (its EntryPoint.load).
_LOADER_DIRS = tuple(d for d in (_IMPORTLIB_DIR, _package_dir("importlib_metadata")) if d)


@dataclass
class PluginInfo:
    """What ``mtrl plugins`` shows about one plugin."""

    name: str
    module: str
    builtin: bool
    package: str | None = None
    version: str | None = None
    status: Status = "ok"
    hooks: list[str] = field(default_factory=list)
    envs: list[str] = field(default_factory=list)
    schedulers: list[str] = field(default_factory=list)
    trackers: list[str] = field(default_factory=list)
    algorithms: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        self.status = "error"
        self.errors.append(message)


@dataclass
class Plugins:
    """The loaded plugin manager, one :class:`PluginInfo` per plugin, and the registries."""

    pm: pluggy.PluginManager
    infos: dict[str, PluginInfo]
    envs: EnvRegistry
    schedulers: SchedulerRegistry = field(default_factory=SchedulerRegistry)
    """Scheduling policies by name (``scheduler.policy`` in configs)."""
    trackers: TrackerRegistry = field(default_factory=TrackerRegistry)
    """Metric trackers by name (``tracking.trackers`` in configs)."""
    algorithms: AlgorithmRegistry = field(default_factory=AlgorithmRegistry)
    """Learning rules by name (``learner.algorithm`` in configs)."""

    def failure_note(self, name: str) -> str | None:
        """Why plugin ``name`` offers nothing (failed to load, unavailable, disabled), in one
        line; None when it loaded."""
        info = self.infos.get(name)
        return None if info is None or info.status == "ok" else _failure_text(info)

    def env_spec(self, env_id: str) -> EnvSpec:
        """The spec of ``env_id``; an unknown id's error adds :meth:`unknown_env_note` (for a
        config built in code, which skips the loader's check)."""
        try:
            return self.envs.get(env_id)
        except UnknownEnvError as e:
            note = self.unknown_env_note(env_id)
            if note is None:
                raise
            raise UnknownEnvError(f"{e}; {note}") from None

    def config_context(self) -> dict[str, Any]:
        """What config parsing checks names against (``load_config(path, **this)``): the env
        ids, scheduler policies, trackers (with their settings models, for ``tracking.<name>:``
        sections) and learning rules (with their parallel modes, settings models for
        ``learner.<name>:`` sections, own config checks and own model defaults) the loaded
        plugins offer, and the note an unknown env id gets."""
        return {
            "env_ids": self.envs.ids(),
            "scheduler_policies": self.schedulers.names(),
            "tracker_names": self.trackers.names(),
            "tracker_settings": self.trackers.settings_models(),
            "algorithms": self.algorithms.parallel_support(),
            "algorithm_settings": self.algorithms.settings_models(),
            "algorithm_checks": self.algorithms.config_checks(),
            "algorithm_learner_defaults": self.algorithms.learner_defaults(),
            "env_note": self.unknown_env_note,
        }

    def unknown_env_note(self, env_id: str) -> str | None:
        """For an env id no plugin registered: ``note: ...`` naming the plugins that did not
        load and may have offered it, so a broken install does not read like a typo.

        A plugin matches by the id's namespace (``foo/...``: plugin ``foo`` or package
        ``mtrl-foo``). When none matches and the namespace is no loaded plugin's, every
        third-party plugin that failed to load is named (its ids are unknown: it never ran).
        """
        namespace = _norm(env_id.split("/", 1)[0]) if "/" in env_id else None
        silent = [i for i in self.infos.values() if i.status != "ok" and not i.envs]
        matched = [i for i in silent if namespace is not None and namespace in _aliases(i)]
        if not matched:
            loaded = {_norm(i.name) for i in self.infos.values() if i.status == "ok"}
            loaded |= {_norm(e.split("/", 1)[0]) for e in self.envs.ids()}
            if namespace in loaded:
                return None
            matched = [i for i in silent if i.status == "error" and not i.builtin]
        return "note: " + "; ".join(map(_failure_text, matched)) if matched else None


def _failure_text(info: PluginInfo) -> str:
    """``plugin 'foo' (package mtrl-foo) failed to load: <reason>``, or unavailable/disabled."""
    who = f"plugin {info.name!r}"
    if info.package and _norm(info.package) != _norm(info.name):
        who += f" (package {info.package})"
    if info.status == "disabled":
        return f"{who} is disabled by {ENV_DISABLE}"
    reason = "; ".join(" ".join(e.removeprefix("import failed: ").split()) for e in info.errors)
    verb = "is unavailable" if info.status == "unavailable" else "failed to load"
    return f"{who} {verb}: {reason or 'no reason given'}"


def _norm(name: str) -> str:
    """Plugin, package and namespace names compared case- and ``-``/``_``-insensitively."""
    return name.lower().replace("_", "-")


def _aliases(info: PluginInfo) -> set[str]:
    """Namespaces a plugin's env ids may carry: its name, its package, the package without
    an ``mtrl-`` prefix."""
    names = {_norm(info.name)}
    if info.package:
        names |= {_norm(info.package), _norm(info.package).removeprefix("mtrl-")}
    return names


def _names(var: str) -> set[str] | None:
    raw = os.environ.get(var, "").strip()
    return {n.strip() for n in raw.split(",") if n.strip()} if raw else None


def _describe(exc: BaseException) -> str:
    """``Type: message (file:line)`` of the innermost frame, for one-line reports; the
    loader's own frames (this module, ``importlib`` and its ``importlib_metadata`` backport,
    ``<frozen ...>``) say nothing, so they
    are skipped (a module that is not there has no line to show)."""
    tb = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(("<", *_LOADER_DIRS)) and f.filename != __file__
    ]
    where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _candidates(autoload: bool, extra: Mapping[str, Any]) -> list[tuple[PluginInfo, Any]]:
    """(info, loader) pairs; the loader returns the plugin object or raises."""
    out: list[tuple[PluginInfo, Any]] = []
    for name, module in BUILTIN_PLUGINS.items():
        out.append(
            (
                PluginInfo(name, module, builtin=True, package="mtrl"),
                lambda m=module: importlib.import_module(m),
            )
        )
    if autoload and not os.environ.get(ENV_DISABLE_AUTOLOAD):
        only = _names(ENV_ONLY)
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if only is not None and ep.name not in only:
                continue
            dist = ep.dist
            info = PluginInfo(
                ep.name,
                ep.value,
                builtin=False,
                package=dist.name if dist else None,
                version=dist.version if dist else None,
            )
            out.append((info, ep.load))
    for name, obj in extra.items():
        module = getattr(obj, "__name__", type(obj).__name__)
        out.append((PluginInfo(name, module, builtin=False), lambda o=obj: o))
    return out


def load_plugins(*, autoload: bool = True, extra: Mapping[str, Any] | None = None) -> Plugins:
    """Import and register every plugin, then collect their envs, policies and trackers.

    ``extra`` maps names to plugin objects registered in-process (tests, notebooks); those are
    not visible to spawned workers, which only see built-ins and entry points.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    disabled = _names(ENV_DISABLE) or set()
    infos: dict[str, PluginInfo] = {}
    for info, loader in _candidates(autoload, extra or {}):
        if info.name in infos:
            info.fail(f"plugin name {info.name!r} is already taken by {infos[info.name].module}")
            infos[f"{info.name} ({info.module})"] = info
            continue
        infos[info.name] = info
        if info.name in disabled:
            info.status = "disabled"
            continue
        try:
            obj = loader()
        except Exception as e:  # a broken plugin must not take the others down
            info.fail(f"import failed: {_describe(e)}")
            continue
        try:
            pm.register(obj, name=info.name)
        except Exception as e:
            info.fail(f"invalid hooks: {e}")
            continue
        _check_pending(pm, info)
        if info.status == "ok":
            info.hooks = sorted(h.name for h in pm.get_hookcallers(obj) or [])

    envs = EnvRegistry()
    _collect(
        pm,
        infos,
        "mtrl_register_envs",
        EnvRegistrar,
        "register.env",
        envs,
        lambda info, spec: info.envs.append(spec.id),
    )
    schedulers = SchedulerRegistry()
    _collect(
        pm,
        infos,
        "mtrl_register_schedulers",
        SchedulerRegistrar,
        "register.policy",
        schedulers,
        lambda info, spec: info.schedulers.append(spec.name),
    )
    trackers = TrackerRegistry()
    _collect(
        pm,
        infos,
        "mtrl_register_trackers",
        TrackerRegistrar,
        "register.tracker",
        trackers,
        lambda info, spec: info.trackers.append(spec.name),
    )
    algorithms = AlgorithmRegistry()
    _collect(
        pm,
        infos,
        "mtrl_register_algorithms",
        AlgorithmRegistrar,
        "register.algorithm",
        algorithms,
        lambda info, spec: info.algorithms.append(spec.name),
    )
    return Plugins(
        pm=pm,
        infos=infos,
        envs=envs,
        schedulers=schedulers,
        trackers=trackers,
        algorithms=algorithms,
    )


def _check_pending(pm: pluggy.PluginManager, info: PluginInfo) -> None:
    """An implementation whose name matches no hookspec is a typo: reject the plugin."""
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        pm.unregister(name=info.name)
        info.fail(f"unknown hook (not in mtrl.plugins.hookspecs): {e}")


def _call_register_hook(hook: str, impl: Any, info: PluginInfo, registrar: Any, call: str) -> bool:
    """Call one plugin's ``hook`` with ``registrar``; False (``info`` updated) on failure.

    ``call`` names the registrar method the hook should have used, for the error message.
    """
    try:
        result = impl.function(**{a: registrar for a in impl.argnames})
    except PluginUnavailable as e:
        info.status = "unavailable"
        info.errors.append(str(e))
        return False
    except Exception as e:
        info.fail(f"{hook} raised {_describe(e)}")
        return False
    if result is not None:
        info.fail(
            f"{hook} must call {call}(...) and return None, but returned {type(result).__name__}"
        )
        return False
    for problem in registrar.problems:
        info.fail(problem)
    return True


def _collect(
    pm: pluggy.PluginManager,
    infos: dict[str, PluginInfo],
    hook: str,
    make_registrar: Callable[[str], Any],
    call: str,
    registry: Any,
    listed: Callable[[PluginInfo, Any], None],
) -> None:
    """Call ``hook`` of every plugin with its own registrar, isolated per plugin, and add what
    it registered to ``registry`` (``listed`` notes each item on the plugin's info)."""
    # get_hookimpls() lists plugins in registration order: built-ins first, so they keep
    # their names when a later plugin registers the same one.
    for impl in getattr(pm.hook, hook).get_hookimpls():
        info = infos[impl.plugin_name]
        registrar = make_registrar(impl.plugin_name)
        if not _call_register_hook(hook, impl, info, registrar, call):
            continue
        for spec in registrar.specs:
            try:
                registry.add(spec)
            except Exception as e:
                info.fail(str(e))
                continue
            listed(info, spec)


_CACHED: Plugins | None = None


def get_plugins() -> Plugins:
    """The process-wide plugin set, loaded on first use."""
    global _CACHED
    if _CACHED is None:
        _CACHED = load_plugins()
    return _CACHED


def reset_plugins() -> None:
    """Forget the cached plugin set (after installing a plugin, or in tests)."""
    global _CACHED
    _CACHED = None
