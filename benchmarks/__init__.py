"""Benchmarks: speed and quality goals measured on simulations, with results written to files."""
