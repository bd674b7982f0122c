"""Plain-Python runtime behind the KFP components (no kfp imports here).

Embedded into the compiled components (each takes only the modules its body needs), so it
depends only on the pip-installable libraries in ``vsp.components.packaging.RUNTIME_REQUIREMENTS``.

Subpackages, lowest first:

- ``core``: errors and exit codes, the Vertex REST client, the polling primitive, long-running
  operations, ``gcp_resources``, the step wrapper, and file primitives (atomic writes, Cloud
  Storage path mapping).
- ``trainer``: what a user's trainer imports (the trainer contract, checkpoints, the checkpoint
  interval policy, model files); steps use only its numpy-free ``contract``, ``manifests`` (the
  readers) and ``policy``.
- ``cluster``: training cluster specs, their validation, the request builder and diff, the
  cluster resource and its operations, labels, in-use checks, the reaper and the step runner.
- ``slurm``: the Slurm Job API client, job descriptions and batch scripts, accounting, and the
  Slurm training backend.
- ``training``: the backend-agnostic supervisor, recovery strategies, metrics, the report, job
  logs, and the CustomJob backend.
- ``registry``: Model Registry uploads and the run's parameter check.
- ``teardown``: the keep-or-delete decision, run cadence, history and its report.

Dependency rules (enforced by ``tests/runtime/test_layers.py``):

1. No runtime module imports kfp.
2. ``core`` imports nothing else from the runtime.
3. ``trainer`` imports only ``core`` (and is the only place numpy may be imported).
4. Step code (every subpackage but ``trainer``) imports from ``trainer`` only its numpy-free
   modules, ``contract``, ``manifests`` and ``policy``.
5. Above that, each subpackage imports only these (``ALLOWED`` in the test): ``training``:
   core, trainer; ``teardown``: core, cluster (applying a decision labels or deletes a
   cluster); ``registry``: core, trainer, teardown, training, cluster (the run's parameter
   check covers the teardown's and the training step's, and prices the cluster to be
   created);
   ``slurm``: core, cluster, trainer, training; ``cluster``: core, slurm (the in-use check
   reads the live queue), teardown (expiry labels).
"""
