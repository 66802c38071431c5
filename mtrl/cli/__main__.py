"""``python -m mtrl.cli ARGS``: the ``mtrl`` command, as torchrun relaunches it
(``mtrl train --nproc N``) and as tests and benchmarks run it."""

import sys

from mtrl.cli import main

sys.exit(main())
