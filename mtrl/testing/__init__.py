"""Tools for plugin authors: the env conformance suite, and a fault drill.

    from mtrl.testing import check_env, fault_drill
    check_env("myplugin/MyEnv-v0")   # raises ConformanceError naming the broken rule
    fault_drill("myplugin/MyEnv-v0", 4, inject=kill_my_solver)   # counted, restarted?

``pytest`` users get the same as the ``mtrl_check_env`` fixture (mtrl registers a pytest plugin).
"""

from mtrl.testing.conformance import ConformanceError, ConformanceReport, check_env
from mtrl.testing.fault_drill import DrillResult, fault_drill

__all__ = ["ConformanceError", "ConformanceReport", "DrillResult", "check_env", "fault_drill"]
