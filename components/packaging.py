"""How components are built: a stock Python image plus the runtime embedded in the YAML.

Each component is a lightweight KFP Python component whose compiled YAML carries
``vsp/components/runtime`` as an embedded archive (kfp's ``embedded_artifact_path``), so a template
runs on a stock ``python`` image with only pip-installable dependencies and no image of ours.
``ImageOptions(base_image=..., install_packages=False)`` instead targets a prebuilt image that
already has the requirements (and kfp) installed; local runs use it with the current interpreter.

Each component embeds only the runtime modules its body imports and, transitively, what those
import (found by reading the ``from vsp.components.runtime.SUB import ...`` statements with
``ast``; a module is named ``SUB.NAME``, e.g. ``core.rest``):
kfp passes the archive as a single command argument, and Linux refuses one argument over
128 KiB (E2BIG), so embedding the whole runtime in every component would not scale. Only
``*.py`` files are staged, so caches and editor files never leak into templates. The archive
kfp writes is not byte-reproducible (tar and gzip record times); ``pipelines.compile``
normalises it after compiling.

A step program may also import a component module: kfp writes an import of each custom
artifact type a component uses (``from vsp.components.artifact_types import VertexModel``) at
the top of the program, before the embedded archive is unpacked. Such modules
(``components/NAME.py``) are embedded next to the runtime, and ``defer_embedded_imports`` moves
their import lines after the unpacking, so the type comes from the archive and no package has to
be installed for it.

Cancel must reach the step: on Vertex AI Pipelines the container's command runs as PID 1, and
kfp's lightweight command is two ``sh`` stages (``sh -c "pip install ... && $0 $@"``, then
``sh -ec "... python3 -m kfp.dsl.executor_main ..."``) that do not ``exec``, so the SIGTERM sent
on cancel would stop at ``sh`` and never reach the Python handler that cancels the Slurm job or
CustomJob. ``exec_in_place`` rewrites both stages to ``exec`` their successor, so PID 1 becomes
the Python step itself. It fails loudly if a kfp release changes the command's shape.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import os
import pathlib
import shutil
import tempfile
from collections.abc import Callable

from kfp import dsl
from kfp.dsl.types import custom_artifact_types

DEFAULT_BASE_IMAGE = "python:3.11-slim"
RUNTIME_REQUIREMENTS = (
    "google-auth>=2.20,<3",
    "google-api-core>=2.15,<3",
    "requests>=2.31,<3",
    "pydantic>=2.6,<3",
    "PyYAML>=6,<7",
    "croniter>=2,<8",
)
_COMPONENTS_DIR = pathlib.Path(__file__).resolve().parent
_RUNTIME_DIR = _COMPONENTS_DIR / "runtime"
_RUNTIME_PACKAGE = "vsp.components.runtime"
_COMPONENTS_PACKAGE = "vsp.components"
_STUB_INIT = '"""Embedded runtime of vertex-slurm-pipelines."""\n'


@dataclasses.dataclass(frozen=True)
class ImageOptions:
    """The image a component runs in.

    Attributes:
        base_image: Container image of every step.
        install_packages: True for a stock image (kfp and the runtime requirements are
            pip-installed when the step starts); False for an image that already has them.
    """

    base_image: str = DEFAULT_BASE_IMAGE
    install_packages: bool = True


STOCK_IMAGE = ImageOptions()
PREINSTALLED = ImageOptions(install_packages=False)


def runtime_imports(tree: ast.AST) -> set[str]:
    """Names (``SUB.NAME``) of the runtime modules a parsed source imports.

    Understands ``from vsp.components.runtime.SUB import a, b as c``,
    ``from vsp.components.runtime.SUB.NAME import x`` and
    ``import vsp.components.runtime.SUB.NAME``, wherever they appear (function bodies included).
    """
    found: set[str] = set()
    prefix = _RUNTIME_PACKAGE + "."

    def parts(module: str) -> list[str]:
        return module[len(prefix) :].split(".") if module.startswith(prefix) else []

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            path = parts(node.module)
            if len(path) == 1:
                found.update(f"{path[0]}.{alias.name}" for alias in node.names)
            elif len(path) >= 2:
                found.add(f"{path[0]}.{path[1]}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                path = parts(alias.name)
                if len(path) >= 2:
                    found.add(f"{path[0]}.{path[1]}")
    return found


def module_file(module: str) -> pathlib.Path:
    """The source file of runtime module ``SUB.NAME``."""
    return _RUNTIME_DIR.joinpath(*module.split(".")).with_suffix(".py")


@functools.cache
def _module_imports(module: str) -> frozenset[str]:
    source = module_file(module)
    if not source.is_file():
        raise ValueError(
            f"{_RUNTIME_PACKAGE}.{module} is imported but {source} does not exist. Fix: "
            "correct the import or add the module."
        )
    return frozenset(runtime_imports(ast.parse(source.read_text(), filename=str(source))))


def runtime_closure(roots: set[str] | frozenset[str]) -> frozenset[str]:
    """The runtime modules ``roots`` need: themselves and everything they import, transitively."""
    closure: set[str] = set()
    pending = list(roots)
    while pending:
        module = pending.pop()
        if module not in closure:
            closure.add(module)
            pending.extend(_module_imports(module) - closure)
    return frozenset(closure)


def component_modules(func: Callable) -> frozenset[str]:
    """The runtime modules a component function needs, from the imports in its body."""
    source = inspect.getsource(func)
    return runtime_closure(runtime_imports(ast.parse(inspect.cleandoc("\n" + source))))


@functools.cache
def staged_runtime(modules: frozenset[str], component_files: frozenset[str] = frozenset()) -> str:
    """A directory holding ``vsp/components/runtime`` with the named modules and their packages.

    Built once per module set and process, in a temporary directory removed at exit.

    Args:
        modules: Runtime module names, ``SUB.NAME`` (e.g. ``core.rest``).
        component_files: Component modules to embed as ``vsp/components/NAME.py`` (e.g.
            ``artifact_types``).
    """
    root = pathlib.Path(tempfile.mkdtemp(prefix="vsp-runtime-"))
    package = root / "vsp" / "components" / "runtime"
    package.mkdir(parents=True)
    for stub in (root / "vsp", root / "vsp" / "components"):
        (stub / "__init__.py").write_text(_STUB_INIT)
    shutil.copyfile(_RUNTIME_DIR / "__init__.py", package / "__init__.py")
    for module in sorted(modules):
        sub, _, name = module.partition(".")
        (package / sub).mkdir(exist_ok=True)
        shutil.copyfile(_RUNTIME_DIR / sub / "__init__.py", package / sub / "__init__.py")
        shutil.copyfile(module_file(module), package / sub / f"{name}.py")
    for name in sorted(component_files):
        shutil.copyfile(_COMPONENTS_DIR / f"{name}.py", root / "vsp" / "components" / f"{name}.py")
    import atexit  # noqa: PLC0415

    atexit.register(shutil.rmtree, root, True)
    return os.fspath(root)


_PIP_STAGE_RUN = '&& "$0" "$@"'
_EXECUTOR_STAGE_RUN = "_KFP_RUNTIME=true python3 -m kfp.dsl.executor_main"


def exec_in_place(command: list[str]) -> list[str]:
    """kfp's lightweight command with each ``sh`` stage exec-ing the next (see module docstring).

    Raises:
        RuntimeError: The command does not have the shape this rewrite knows (a kfp upgrade
            changed it); the component would not receive SIGTERM on cancel.
    """
    rewritten = list(command)
    executor_stages = [i for i, part in enumerate(rewritten) if _EXECUTOR_STAGE_RUN in part]
    pip_stages = [i for i, part in enumerate(rewritten) if part.rstrip().endswith(_PIP_STAGE_RUN)]
    if len(executor_stages) != 1 or len(pip_stages) > 1:
        raise RuntimeError(
            "kfp's component command changed shape; cannot make the step exec into Python. "
            "Fix: update components.packaging.exec_in_place for this kfp version."
        )
    index = executor_stages[0]
    rewritten[index] = rewritten[index].replace(
        _EXECUTOR_STAGE_RUN, "_KFP_RUNTIME=true exec python3 -m kfp.dsl.executor_main"
    )
    for index in pip_stages:
        head, _, tail = rewritten[index].rpartition(_PIP_STAGE_RUN)
        rewritten[index] = f'{head}&& exec "$0" "$@"{tail}'
    return rewritten


_EXTRACTION_END = "    __kfp_sys.path.insert(0, __KFP_EMBEDDED_ASSET_DIR)\n"


def component_module_imports(func: Callable) -> dict[str, str]:
    """The import lines kfp writes for a component's custom artifact types from our package.

    Returns:
        ``{import line: component module name}``, e.g.
        ``{"from vsp.components.artifact_types import VertexModel": "artifact_types"}``.

    Raises:
        ValueError: A type comes from a ``vsp`` module other than a top-level component module
            (only ``components/NAME.py`` files are embedded).
    """
    found = {}
    for line in custom_artifact_types.get_custom_artifact_type_import_statements(func):
        words = line.split()
        module = words[1] if words[0] == "from" else words[-1]
        if not module.startswith("vsp."):
            continue
        package, _, name = module.rpartition(".")
        if package != _COMPONENTS_PACKAGE:
            raise ValueError(
                f"{func.__name__} uses an artifact type from {module}; only modules directly in "
                f"{_COMPONENTS_PACKAGE} are embedded. Fix: define the type in "
                "vsp.components.artifact_types."
            )
        found[line] = name
    return found


def defer_embedded_imports(program: str, import_lines: list[str]) -> str:
    """A step program with ``import_lines`` moved after the embedded archive is unpacked.

    Raises:
        RuntimeError: The program does not have the shape this rewrite knows (a kfp upgrade
            changed it); the step would fail to import the type.
    """
    if not import_lines:
        return program
    header, found, body = program.partition(_EXTRACTION_END)
    present = [line for line in import_lines if f"\n{line}\n" in header]
    if not found or present != import_lines:
        raise RuntimeError(
            "kfp's component program changed shape; cannot move the artifact type imports after "
            "the embedded archive is unpacked. Fix: update "
            "components.packaging.defer_embedded_imports for this kfp version."
        )
    for line in import_lines:
        header = header.replace(f"\n{line}\n", "\n", 1)
    moved = "".join(f"{line}\n" for line in import_lines)
    return f"{header}{found}{moved}{body}"


def build_component(
    func: Callable, options: ImageOptions, extra_packages: tuple[str, ...] = ()
) -> Callable:
    """Turns a component function into a KFP component with the embedded runtime.

    Args:
        func: The component function (its body imports from ``vsp.components.runtime``).
        options: Image and install choice.
        extra_packages: Requirements of this component beyond ``RUNTIME_REQUIREMENTS`` (pip
            specifiers), installed only on a stock image.
    """
    packages = [*RUNTIME_REQUIREMENTS, *extra_packages] if options.install_packages else []
    own_imports = component_module_imports(func)
    component = dsl.component(
        func,
        base_image=options.base_image,
        packages_to_install=packages,
        install_kfp_package=options.install_packages,
        embedded_artifact_path=staged_runtime(
            component_modules(func), frozenset(own_imports.values())
        ),
    )
    container = component.component_spec.implementation.container
    command = exec_in_place(container.command)
    command[-1] = defer_embedded_imports(command[-1], list(own_imports))
    container.command = command
    return component
