"""Training backends side by side: what the supervisor drives, one module per kind of attempt."""
