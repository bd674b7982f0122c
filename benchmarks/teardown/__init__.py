"""Teardown benchmarks: keep, shrink or delete against the optimum over run traces."""
