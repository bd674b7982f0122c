"""Vertex AI Model Registry: uploading model versions, and the run's parameter check."""
