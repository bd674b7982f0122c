"""The Slurm Job API (``:callSlurmRestApi``): client, job descriptions, scripts, accounting."""
