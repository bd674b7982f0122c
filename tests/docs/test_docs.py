"""The documentation: the site builds with warnings as errors, the README stays short, and the
generated reference (``docs/hooks/reference.py``) documents every parameter or fails the build.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import pathlib
import re
import subprocess
import sys
import types
from typing import NamedTuple

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
HOOK = REPO / "docs" / "hooks" / "reference.py"
README_LIMIT = 15_000


@pytest.fixture(scope="module")
def reference() -> types.ModuleType:
    """The hook module, loaded from its file as mkdocs loads it."""
    spec = importlib.util.spec_from_file_location("vsp_docs_reference_hook", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(reference) -> str:
    return reference.generate()


def section(text: str, name: str) -> str:
    """The reference's section of ``name``: from its heading to the next one."""
    return text.split(f"### `{name}`\n", 1)[1].split("\n### ", 1)[0]


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    page = (site / "reference" / "index.html").read_text()
    assert "train_on_cluster" in page and "slurm-spot-training" in page
    assert "reference: generated" not in page  # the markers were replaced
    assert "embedded runtime: generated" not in (site / "architecture" / "index.html").read_text()
    assert not (site / "hooks").exists()  # the hook is not published


def test_the_readme_is_short():
    size = (REPO / "README.md").stat().st_size
    assert size <= README_LIMIT, f"README.md is {size} bytes; keep it under {README_LIMIT}"


def test_the_readme_links_pages_that_exist_and_shows_valid_python():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert len(links) >= 10
    assert [link for link in links if not (REPO / link).is_file()] == []
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    ast.parse(block)
    assert "from vsp.components import" in block


def test_the_readmes_pipeline_compiles_and_wires_the_training_into_registration(
    tmp_path, monkeypatch
):
    """The README's own pipeline, run as written: it compiles, and the registration gets the
    training's jobs and preemptions (without them a version said 0 preemptions after 2)."""
    block = (REPO / "README.md").read_text().split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec", dont_inherit=True), {"__name__": "readme"})  # noqa: S102
    spec = yaml.safe_load((tmp_path / "my_spot_training.yaml").read_text())
    tasks = spec["root"]["dag"]["tasks"]["exit-handler-1"]
    register = spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]["register-model"]
    wired = register["inputs"]["parameters"]
    for name in ("job_ids", "preemptions", "model_dir"):
        assert wired[name]["taskOutputParameter"]["producerTask"] == "train-on-cluster", name
    assert tasks["componentRef"]["name"] == "comp-exit-handler-1"


def test_the_reference_names_every_component_parameter_and_output(generated):
    from vsp.components import catalog

    declared = catalog.declarations()
    assert len(declared) >= 13
    for name, func in declared.items():
        text = section(generated, name)
        signature = inspect.signature(func)
        for parameter in signature.parameters:
            assert f"| `{parameter}` |" in text or f"| {parameter} |" in text, (name, parameter)
        for field in getattr(signature.return_annotation, "_fields", ()):
            assert f"| {field} |" in text, (name, field)


def test_the_reference_names_every_pipeline_input(generated):
    from vsp.components import catalog
    from vsp.pipelines.definitions.catalog import PIPELINES

    built = catalog.component_set()
    assert len(PIPELINES) >= 4
    for name, build in PIPELINES.items():
        text = section(generated, name)
        for parameter in build(built).component_spec.inputs or {}:
            assert f"| `{parameter}` |" in text, (name, parameter)


def planted_component(project: str, undocumented: int = 1) -> str:
    """A component whose docstring misses a parameter.

    Args:
        project: Google Cloud project id.

    Returns:
        Something.
    """
    return project


def planted_pipeline(project: str, forgotten: str = ""):
    """A pipeline whose docstring misses an input.

    Args:
        project: Google Cloud project id.
    """


def planted_outputs(project: str) -> NamedTuple("Outputs", [("kept", str), ("missing", int)]):
    """A component whose docstring misses an output.

    Args:
        project: Google Cloud project id.

    Returns:
        kept: Documented.
    """
    return project, 0


def test_a_parameter_without_a_description_fails_the_build(reference):
    with pytest.raises(reference.ReferenceGap, match=r"component planted.*'undocumented'"):
        reference.generate(components={"planted": planted_component}, pipelines={})
    with pytest.raises(reference.ReferenceGap, match=r"pipeline planted.*'forgotten'"):
        reference.generate(components={}, pipelines={"planted": planted_pipeline})
    with pytest.raises(reference.ReferenceGap, match=r"component planted.*'missing'"):
        reference.generate(components={"planted": planted_outputs}, pipelines={})


def test_a_documented_planted_component_gets_its_table(reference):
    def documented(project: str, retries: int = 3) -> str:
        """Does one thing.

        Args:
            project: Google Cloud project id.
            retries: How many  times,
                at most.

        Returns:
            What it did.
        """
        return project

    text = reference.generate(components={"documented": documented}, pipelines={})
    assert "| `retries` | int | `3` | How many times, at most. |" in text
    assert "| `project` | str | required | Google Cloud project id. |" in text
    assert "| Output | str | What it did. |" in text


def test_the_architecture_page_shows_what_each_compiled_component_embeds(reference):
    from vsp import components

    table = reference.embedded_table()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(components.COMPONENTS)
    for row in rows:
        modules, source, encoded, arguments = row.strip("| ").split(" | ")[1:]
        assert int(modules) > 0 and 0 < float(encoded) < float(source)
        assert float(encoded) <= 32 * int(arguments)  # no argument over 32 KiB


def test_the_hook_fills_only_its_pages(reference, monkeypatch):
    monkeypatch.setattr(reference, "generate", lambda: "GENERATED")
    monkeypatch.setattr(reference, "embedded_table", lambda: "TABLE")

    def page(uri: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(file=types.SimpleNamespace(src_uri=uri))

    marker = reference.MARKER
    assert reference.on_page_markdown(f"a\n{marker}\n", page("reference.md"), None, None) == (
        "a\nGENERATED\n"
    )
    assert reference.on_page_markdown(marker, page("index.md"), None, None) == marker
    embedded = reference.EMBEDDED_MARKER
    assert reference.on_page_markdown(embedded, page("architecture.md"), None, None) == "TABLE"
    with pytest.raises(reference.ReferenceGap, match="marker"):
        reference.on_page_markdown("no marker", page("reference.md"), None, None)
