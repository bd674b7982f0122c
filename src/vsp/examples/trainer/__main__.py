"""Entry point of ``python -m vsp.examples.trainer``.

BLAS is pinned to one thread *before* numpy is imported: a resumed attempt may land on a VM with
a different core count, and a different BLAS thread count may change the summation order and
so the last bits of the parameters. Set the variables yourself to override.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from vsp.examples.trainer import cli  # noqa: E402  (must follow the BLAS pinning above)

if __name__ == "__main__":
    raise SystemExit(cli.main())
