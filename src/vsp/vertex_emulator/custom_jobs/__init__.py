"""CustomJobs: API, job specs, local replica processes, Spot preemption."""
