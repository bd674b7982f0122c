"""Polling benchmark: Vertex calls per job-hour and the detection delay of the poll plan."""
