"""Step start benchmark: what happens before a step's own code runs, stock and prebuilt."""
