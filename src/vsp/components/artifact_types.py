"""Artifact types of the components, defined here so no step installs a package just for a type.

``VertexModel`` carries the schema title and version of google-cloud-pipeline-components'
(GCPC) ``google.VertexModel``. kfp supports custom artifact types as ``dsl.Artifact`` subclasses
with a ``schema_title`` and ``schema_version`` (the compiler writes them as the output's
``artifactType``), and GCPC ops such as ``ModelDeployOp`` and ``ModelBatchPredictOp`` match
their ``google.VertexModel`` inputs by schema title, so our output feeds them unchanged while the
step installs only kfp and the runtime's requirements (GCPC would add about 360 MB and a minute
to the step's start).

For a lightweight component, kfp writes ``from vsp.components.artifact_types import VertexModel``
into the step's program; ``components.packaging`` embeds this file with the runtime and places
that import after the embedded archive is unpacked. The module imports only kfp, which every
step has.
"""

from kfp import dsl


class VertexModel(dsl.Artifact):
    """A Vertex AI Model resource (a Model Registry version), as GCPC's ``google.VertexModel``.

    Attributes:
        schema_title: ``google.VertexModel``, the title GCPC ops accept.
        schema_version: ``0.0.1``, GCPC's version of the schema.

    The ``uri`` is the model's REST URL (``https://LOCATION-aiplatform.googleapis.com/v1/...``)
    and ``metadata["resourceName"]`` its resource name, as GCPC's own ops write them.
    """

    schema_title = "google.VertexModel"
    schema_version = "0.0.1"


# Component modules (``components/NAME.py``) that a step program imports; packaging embeds them.
EMBEDDED_MODULE = "vsp.components.artifact_types"
