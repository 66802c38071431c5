"""Train one config given as YAML on the command line and print ``RESULT {"updates": N, ...}``
(the Ray liveness case runs here, in its own process inside a private network namespace)."""

from __future__ import annotations

import json
import sys

from mtrl.config import parse_config
from mtrl.train.trainer import Trainer


def main(yaml: str) -> None:
    trainer = Trainer(parse_config(yaml), console=False, write_run_dir=False)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    print("RESULT " + json.dumps({"updates": result.updates, "env_steps": result.env_steps}))


if __name__ == "__main__":
    main(sys.argv[1])
