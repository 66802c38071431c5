"""Tools for plugin authors: the env conformance suite.

    from mtrl.testing import check_env
    check_env("myplugin/MyEnv-v0")   # raises ConformanceError naming the broken rule

``pytest`` users get the same as the ``mtrl_check_env`` fixture (mtrl registers a pytest plugin).
"""

from mtrl.testing.conformance import ConformanceError, ConformanceReport, check_env

__all__ = ["ConformanceError", "ConformanceReport", "check_env"]
