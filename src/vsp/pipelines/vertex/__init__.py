"""Running on Vertex AI Pipelines: requests, schedules, templates, caching, first-step check."""
