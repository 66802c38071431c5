"""Exceptions that carry a user-facing message.

A :class:`UserError` is a mistake the user can fix (bad config, unknown env id, bad plugin);
the CLI prints its message and exits with status 2 instead of showing a traceback.
"""

from __future__ import annotations


class MtrlError(Exception):
    """Base class of every error mtrl raises on purpose."""


class UserError(MtrlError):
    """A mistake in the user's input; the message says what is wrong, where, and how to fix it."""

    def __init__(self, message: str, *, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]

    @property
    def problems(self) -> list[str]:
        """One line per problem. A subclass that also derives from a built-in exception
        (``class E(SimulationError, UserError)``) runs that one's ``__init__``, not this
        class's: its message, line by line, is then the list."""
        return self.__dict__.get("_problems") or str(self).splitlines() or [repr(self)]

    @problems.setter
    def problems(self, lines: list[str]) -> None:
        self.__dict__["_problems"] = list(lines)


class ConfigError(UserError):
    """An experiment config failed to load or validate; ``problems`` has one line per issue."""


class UnknownNameError(UserError, KeyError):
    """A name (env id, learning rule, scheduling policy, tracker) that no loaded plugin
    registered; the message says which are known (did-you-mean)."""

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


class UnknownEnvError(UnknownNameError):
    """An env id that no loaded plugin registered."""


class EnvKwargsError(UserError, ValueError):
    """An env factory rejected the ``env_kwargs`` it was given: unknown or ill-typed
    (``TypeError``) or out of range (``ValueError``)."""


class PluginError(MtrlError):
    """A plugin broke its contract (failed import, raising hook, malformed registration)."""


class PluginUnavailable(MtrlError):
    """Raised by a hook when an optional dependency of its plugin is not installed.

    The plugin is then listed as *unavailable* with this message (not as an error).
    """


class CheckpointError(UserError):
    """A checkpoint is missing, unreadable or unsafe to load (it carries pickled code)."""
