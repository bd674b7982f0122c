"""vertex-slurm-pipelines: the one import root of the distribution.

Its subpackages live in the repository's top-level folders (``pyproject.toml`` maps them):
``vsp.components`` (``components/``: the KFP components and the runtime they call),
``vsp.pipelines`` (``pipelines/``: pipeline definitions and the ``vsp`` command line),
``vsp.vertex_emulator`` (``vertex_emulator/``: the local Vertex AI emulator) and
``vsp.examples`` (``examples/``: the example trainer).
"""
