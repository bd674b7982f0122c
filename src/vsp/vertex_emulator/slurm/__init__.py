"""The Slurm Job API: a simulated Slurm per cluster with real job processes."""
