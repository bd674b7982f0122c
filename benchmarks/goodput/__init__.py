"""Goodput benchmarks: the metric against the truth, the checkpoint policy, scaled runs."""
