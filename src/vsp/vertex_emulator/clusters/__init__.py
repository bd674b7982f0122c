"""Training clusters (``modelDevelopmentClusters``): API, request checks, schema."""
