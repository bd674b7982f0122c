"""Example trainers shipped with the project."""
