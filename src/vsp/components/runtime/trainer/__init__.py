"""What a user's trainer imports: checkpoints, the checkpoint policy and model files.

``checkpoint`` and ``model_files`` need numpy; ``manifests`` (their numpy-free readers) and
``policy`` are also used by the pipeline steps, which run without numpy.
"""
