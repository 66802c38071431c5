"""mtrl-scisim: scientific simulations as batched mtrl environments.

Installed, it registers through the ``mtrl`` entry-point group (module :mod:`mtrl_scisim.plugin`):

* ``scisim/heat1d`` — heater control of the 1-D heat equation (:mod:`mtrl_scisim.heat`);
* ``scisim/epidemic`` — a stochastic SIR epidemic with interventions (:mod:`mtrl_scisim.epidemic`).
"""

from mtrl_scisim.epidemic import EpidemicBatchEnv, sir_final_size
from mtrl_scisim.heat import Heat1DBatchEnv, HeatEquation1D

__all__ = ["EpidemicBatchEnv", "Heat1DBatchEnv", "HeatEquation1D", "sir_final_size"]
__version__ = "0.1.0"
