"""register_model's ``google.VertexModel`` output without google-cloud-pipeline-components.

The type is ``vsp.components.artifact_types.VertexModel``, embedded with the runtime; GCPC is
installed in the development environment only, to prove its ops accept the output.
"""

# No postponed annotations: pipelines and components below are defined here and kfp reads
# their types.

import os
import subprocess
import sys

import pytest
import yaml
from kfp import dsl

from tests.components import compiled_steps, gcpc_wiring
from vsp.components import artifact_types, catalog, packaging


@pytest.mark.slow
def test_python_component_output_feeds_gcpc_deploy_and_batch_predict(tmp_path):
    """The component as Python users build it (not the YAML) wires into two GCPC consumers;
    kfp's compile-time type check accepts the schema title."""
    register_op = catalog.component_set()["register_model"]

    spec = gcpc_wiring.compiled_spec(register_op, tmp_path, batch_predict=True)
    ours = spec["components"]["comp-register-model"]["outputDefinitions"]["artifacts"]["model"]
    assert ours["artifactType"] == {"schemaTitle": "google.VertexModel", "schemaVersion": "0.0.1"}
    for consumer in ("comp-model-deploy", "comp-model-batch-predict"):
        model_input = spec["components"][consumer]["inputDefinitions"]["artifacts"]["model"]
        assert model_input["artifactType"]["schemaTitle"] == "google.VertexModel"
    for consumer in ("model-deploy", "model-batch-predict"):
        assert gcpc_wiring.model_source(spec, consumer) == gcpc_wiring.FROM_REGISTER


def test_the_type_matches_gcpc_schema_title_and_version():
    from google_cloud_pipeline_components.types.artifact_types import VertexModel as Gcpc

    ours = artifact_types.VertexModel
    assert (ours.schema_title, ours.schema_version) == (Gcpc.schema_title, Gcpc.schema_version)
    assert ours.schema_title == "google.VertexModel" and ours.schema_version == "0.0.1"


def test_register_model_installs_no_gcpc():
    step = compiled_steps.CompiledStep.load("register_model")
    assert step.requirements() == [*packaging.RUNTIME_REQUIREMENTS, "kfp==2.17.3"]
    assert "google-cloud-pipeline-components" not in step.install_stage
    assert "google_cloud_pipeline_components" not in step.program
    assert "vsp/components/artifact_types.py" in step.embedded_files()


def test_the_step_program_takes_the_type_from_its_embedded_archive(tmp_path):
    """The program as kfp's executor loads it, in an interpreter that cannot see the
    repository: the type is imported after the archive is unpacked, from the archive."""
    step = compiled_steps.CompiledStep.load("register_model")
    program = step.write_program(tmp_path)
    code = (
        "import runpy, sys\n"
        "sys.path = [p for p in sys.path if p and not p.startswith('/work')]\n"
        f"namespace = runpy.run_path({str(program)!r})\n"
        "module = sys.modules['vsp.components.artifact_types']\n"
        "assert '/vsp-runtime-' in module.__file__, module.__file__\n"
        "annotation = namespace['register_model'].__annotations__['model']\n"
        "print(module.VertexModel.schema_title, annotation.__args__[0] is module.VertexModel)\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-I", "-c", code],
        cwd=tmp_path, env={**environment, "_KFP_RUNTIME": "true"},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "google.VertexModel True"


def test_the_import_comes_after_the_runtime_is_unpacked():
    text = compiled_steps.CompiledStep.load("register_model").program
    line = "from vsp.components.artifact_types import VertexModel"
    assert text.count(line) == 1
    assert text.index("__vsp_unpack_runtime()\n") < text.index(line)


def test_an_unknown_command_shape_fails_loudly():
    with pytest.raises(RuntimeError, match="cannot embed the runtime"):
        packaging.embed_runtime(["sh", "-c", "python3 -m kfp.dsl.executor_main"], ["AAAA"])


class Foreign(dsl.Artifact):
    schema_title = "google.Foreign"
    schema_version = "0.0.1"


Foreign.__module__ = "vsp.pipelines.elsewhere"


def test_a_type_outside_the_components_package_is_refused():
    def uses_foreign(out: dsl.Output[Foreign]):
        pass

    with pytest.raises(ValueError, match="only modules directly in vsp.components"):
        packaging.component_module_imports(uses_foreign)


def test_kfp_types_need_no_rewrite():
    def uses_model(out: dsl.Output[dsl.Model]):
        pass

    assert packaging.component_module_imports(uses_model) == {}


@pytest.mark.slow
def test_vsp_compile_base_image_templates_install_nothing_and_keep_the_type(tmp_path):
    from click.testing import CliRunner

    from vsp.pipelines.cli import main

    image = "us-central1-docker.pkg.dev/my-project/vsp/vsp-step:0.1.0"
    done = CliRunner().invoke(main.main, ["compile", "--base-image", image, "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    components = sorted((tmp_path / "components").glob("*.yaml"))
    assert [p.stem for p in components] == compiled_steps.component_names()
    for path in components:
        spec = yaml.safe_load(path.read_text())
        [container] = [e["container"] for e in spec["deploymentSpec"]["executors"].values()]
        assert container["image"] == image, path.name
        assert container["command"][:2] == ["sh", "-ec"], path.name
        assert "pip install" not in "\n".join(container["command"]), path.name
    spec = yaml.safe_load((tmp_path / "components" / "register_model.yaml").read_text())
    model = spec["root"]["outputDefinitions"]["artifacts"]["model"]["artifactType"]
    assert model == {"schemaTitle": "google.VertexModel", "schemaVersion": "0.0.1"}
