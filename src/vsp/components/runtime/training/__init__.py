"""Spot training supervision for any backend: attempts, recovery, backends, metrics, report."""
