"""Spot training supervision for any backend: attempts, recovery, metrics, report, CustomJobs."""
