"""Vertex AI Pipelines: pipeline jobs and schedules (stored and checked, not run)."""
