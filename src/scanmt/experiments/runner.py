"""The grid worker's entry point: ``python -m scanmt.experiments.runner SPEC.json THREADS`` runs one grid run
(:func:`scanmt.experiments.worker.worker_main`).

The pool (:mod:`scanmt.experiments.pool`) starts its workers under this module's name, as it always has, so that a
grid started before the experiment tooling was split by concept (issue 54) still finds its workers, and scripts
that look for them by command line (``scripts/gpu-grid.sh``) still do.
"""

from __future__ import annotations

import sys

from scanmt.experiments.worker import worker_main

if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
