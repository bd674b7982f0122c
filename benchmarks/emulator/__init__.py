"""Emulator benchmark: latency as the numbers of clusters and model versions grow."""
