"""A PyTorch multi-node example trainer: DDP on gloo (CPU), torch.distributed.checkpoint.

Run it with ``launcher="srun"`` (one process per node, or ``tasks_per_node`` per node) or
``launcher="torchrun"``; it reads ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``.
Needs the ``torch`` extra (``pip install "vertex-slurm-pipelines[torch]"``). See ``train``.
"""
