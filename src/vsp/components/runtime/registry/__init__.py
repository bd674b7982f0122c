"""Vertex AI Model Registry: uploading model versions, one per run."""
