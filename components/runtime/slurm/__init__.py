"""The Slurm Job API (``:callSlurmRestApi``): client, job descriptions and the training backend."""
