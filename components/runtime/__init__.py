"""Plain-Python runtime behind the KFP components (no kfp imports here).

This package is embedded into every compiled component, so it may depend only on
pip-installable libraries listed in ``components.packaging.RUNTIME_REQUIREMENTS``.
"""
