"""Plain-Python runtime behind the KFP components (no kfp imports here).

Embedded into the compiled components (each takes only the modules its body needs), so it
depends only on the pip-installable libraries in ``vsp.components.packaging.RUNTIME_REQUIREMENTS``.

Layers, highest first; a package imports only packages below it, and the three on one line
are independent of each other (import-linter contracts in ``pyproject.toml``, checked by
``tests/runtime/test_layers.py``, which also refuses import cycles between modules):

- ``steps``: one entry module per component (``steps/create_cluster.py`` ...): its ``main``
  takes the component's parameters and returns its outputs.
- ``registry`` | ``teardown`` | ``training``:

  - ``registry``: Model Registry uploads, one version per run.
  - ``teardown``: keep, shrink or delete (``decision.decide``), its inputs, prices and expiry,
    the run history, in-use protection, the exit task's rule and the reaper.
  - ``training``: the backend-agnostic supervisor and recovery strategies, with the backends
    side by side (``training/backends/``: Slurm jobs, CustomJobs), metrics, goodput, report.

- ``slurm``: the Slurm Job API client, job descriptions and batch scripts, accounting.
- ``cluster``: training cluster specs and their rules, the request builder and diff, the
  cluster resource and its operations, labels.
- ``trainer``: what a user's trainer imports (the trainer contract, checkpoints, the checkpoint
  interval policy, model files); the only place numpy may be imported.
- ``core``: errors and exit codes, the Vertex REST client, the polling primitive, long-running
  operations, ``gcp_resources``, the step wrapper, an attempt's ``Outcome``, file primitives.
"""
