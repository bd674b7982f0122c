"""Foundations every other runtime subpackage uses; imports nothing else from the runtime."""
