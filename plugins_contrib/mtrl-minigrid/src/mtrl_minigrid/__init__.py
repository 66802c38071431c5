"""MiniGrid and BabyAI levels as mtrl environments (see ``plugin.py``)."""
