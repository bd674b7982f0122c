"""KFP components for Vertex AI training clusters and Spot training.

The KFP declarations live in the modules of this package; the behaviour they call lives in
``vsp.components.runtime``, which imports neither kfp nor anything that needs a pipeline.
"""
