"""Local runs through kfp.local against the Vertex emulator: the runner, its console, summary."""
