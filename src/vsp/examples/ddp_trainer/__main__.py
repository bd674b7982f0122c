"""Entry point of ``python -m vsp.examples.ddp_trainer``.

Threads are pinned to one before torch is imported, so a resumed attempt on a machine with
another core count sums in the same order and the parameters stay bit-identical.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from vsp.examples.ddp_trainer import train  # noqa: E402  (must follow the pinning above)

if __name__ == "__main__":
    raise SystemExit(train.main())
