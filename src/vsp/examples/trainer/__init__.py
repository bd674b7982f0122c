"""Example Spot-friendly trainer: a small numpy MLP that survives preemption bit-exactly.

Run it with ``python -m vsp.examples.trainer --help``. It imports only numpy and
``vsp.components.runtime`` (checkpoint, checkpoint_policy, model_dir, errors), never kfp or a cloud
SDK, so it runs unchanged on a laptop, in a Vertex CustomJob or in a Slurm job step.
"""
