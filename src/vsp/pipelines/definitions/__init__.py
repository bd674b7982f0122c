"""The pipeline definitions, their tasks and policies, the catalog by name, and compilation."""
