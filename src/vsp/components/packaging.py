"""How components are built: a stock Python image plus the runtime embedded in the YAML.

Each component is a lightweight KFP Python component whose compiled YAML carries the runtime
modules its body needs, so a template runs on a stock ``python`` image with only
pip-installable dependencies and no image of ours. ``ImageOptions(base_image=...,
install_packages=False)`` instead targets a prebuilt image that already has the requirements
(and kfp) installed; local runs use it with the current interpreter.

**What is embedded.** The runtime modules the body imports and, transitively, what those import
(read from the ``from vsp.components.runtime.PACKAGE import ...`` statements with ``ast``; a
module is named by its dotted path in the runtime, e.g. ``core.rest``), as they are in the
sources, docstrings included, with the ``__init__`` of every package on the way. Only ``*.py``
files are embedded, so caches and editor files never leak into templates. A component module
that a step program imports for a custom artifact type (``from vsp.components.artifact_types
import VertexModel``, written by kfp at the top of the program) is embedded too, so no package
has to be installed for the type.

**How.** The files go into a tar archive with fixed names, times, owners and modes (so the same
sources compile to the same bytes), compressed with xz and base64-encoded, then split into
command arguments of ``CHUNK_CHARS`` characters each: Linux refuses a single argument over
128 KiB (E2BIG), and one component's runtime is up to about 100 KiB encoded. kfp's command is
``sh -ec SCRIPT PROGRAM --executor_input ...``; the chunks are added after ``PROGRAM``, the
script writes them to ``vsp_runtime.b64`` beside the program file and drops them from the
arguments, and a few lines at the top of the program (``BOOTSTRAP``) unpack them into a
temporary folder put first on ``sys.path``. kfp's executor (``kfp.dsl.executor_main``) then
loads the program and runs the function unchanged. Hand-rolled: kfp's own
``embedded_artifact_path`` puts the whole archive into the program, a single argument.

**Cancel reaches the step.** On Vertex AI Pipelines the container's command runs as PID 1, and
kfp's lightweight command is two ``sh`` stages (``sh -c "pip install ... && $0 $@"``, then
``sh -ec "... python3 -m kfp.dsl.executor_main ..."``) that do not ``exec``, so the SIGTERM sent
on cancel would stop at ``sh`` and never reach the Python handler that cancels the Slurm job or
CustomJob. ``exec_in_place`` rewrites both stages to ``exec`` their successor, so PID 1 becomes
the Python step itself. Every rewrite here fails loudly if a kfp release changes the command's
shape.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import functools
import inspect
import io
import lzma
import pathlib
import tarfile
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
# Characters of the encoded runtime per command argument: a quarter of Linux's 128 KiB limit.
CHUNK_CHARS = 32 * 1024
RUNTIME_FILE = "vsp_runtime.b64"
_COMPONENTS_DIR = pathlib.Path(__file__).resolve().parent
_RUNTIME_DIR = _COMPONENTS_DIR / "runtime"
_RUNTIME_PACKAGE = "vsp.components.runtime"
_COMPONENTS_PACKAGE = "vsp.components"
_STUB_INIT = b'"""Embedded runtime of vertex-slurm-pipelines."""\n'


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
    """Dotted names (relative to the runtime, e.g. ``core.rest``) of the runtime modules a
    parsed source imports.

    Understands ``from vsp.components.runtime.PACKAGE import a, b as c`` (modules of a
    package), ``from vsp.components.runtime.MODULE import x`` (names of a module) and
    ``import vsp.components.runtime.MODULE``, at any depth and wherever they appear (function
    bodies included).
    """
    found: set[str] = set()
    prefix = _RUNTIME_PACKAGE + "."
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith(prefix):
                continue
            dotted = node.module[len(prefix) :]
            if _RUNTIME_DIR.joinpath(*dotted.split(".")).is_dir():
                found.update(f"{dotted}.{alias.name}" for alias in node.names)
            else:
                found.add(dotted)
        elif isinstance(node, ast.Import):
            found.update(
                alias.name[len(prefix) :] for alias in node.names if alias.name.startswith(prefix)
            )
    return found


def module_file(module: str) -> pathlib.Path:
    """The source file of runtime module ``module`` (dotted, relative to the runtime)."""
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


def runtime_files(
    modules: frozenset[str], component_files: frozenset[str] = frozenset()
) -> dict[str, bytes]:
    """The files a component embeds, by path in the archive (``vsp/components/runtime/...``).

    Args:
        modules: Runtime module names, dotted, relative to the runtime (e.g. ``core.rest``).
        component_files: Component modules to embed as ``vsp/components/NAME.py``.
    """
    files = {
        "vsp/__init__.py": _STUB_INIT,
        "vsp/components/__init__.py": _STUB_INIT,
        "vsp/components/runtime/__init__.py": (_RUNTIME_DIR / "__init__.py").read_bytes(),
    }
    for module in modules:
        parts = module.split(".")
        for depth in range(1, len(parts)):  # every package on the way, with its __init__
            package = _RUNTIME_DIR.joinpath(*parts[:depth], "__init__.py")
            files[f"vsp/components/runtime/{'/'.join(parts[:depth])}/__init__.py"] = (
                package.read_bytes()
            )
        files[f"vsp/components/runtime/{'/'.join(parts)}.py"] = module_file(module).read_bytes()
    for name in component_files:
        files[f"vsp/components/{name}.py"] = (_COMPONENTS_DIR / f"{name}.py").read_bytes()
    return dict(sorted(files.items()))


def write_files(files: dict[str, bytes], folder: str | pathlib.Path) -> pathlib.Path:
    """Writes an embedded file set under ``folder``, as a step unpacks it; returns the folder."""
    root = pathlib.Path(folder)
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def runtime_archive(files: dict[str, bytes]) -> bytes:
    """The files as an xz-compressed tar, byte for byte the same for the same files.

    Compressing is most of the time a component build takes (about 0.1-0.4 s per component on
    2 cores), and every process that builds the components builds each twice (the declarations,
    then ``catalog.component_set`` with other image options): the archive of a file set is
    made once per process.
    """
    return _archive(tuple(sorted(files.items())))


@functools.lru_cache(maxsize=64)
def _archive(files: tuple[tuple[str, bytes], ...]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path, data in files:
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            archive.addfile(info, io.BytesIO(data))
    tar = raw.getvalue()
    # xz -9e with a dictionary as large as the tar (not -9's 64 MiB): as small an archive, in
    # about 60% of the time, most of -9's time being the set-up of a dictionary it never fills.
    lzma2 = {"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": len(tar)}
    lzma2["dict_size"] = max(lzma2["dict_size"], 4096)
    return lzma.compress(tar, filters=[lzma2])


def runtime_chunks(archive: bytes) -> list[str]:
    """The archive, base64-encoded, in command arguments of at most ``CHUNK_CHARS`` characters.

    Raises:
        RuntimeError: A chunk holds ``python3``, which kfp.local's runner would rewrite into
            its interpreter's path (never seen: about one chance in 10**8 per component).
    """
    encoded = base64.b64encode(archive).decode("ascii")
    chunks = [encoded[i : i + CHUNK_CHARS] for i in range(0, len(encoded), CHUNK_CHARS)]
    if any("python3" in chunk for chunk in chunks):
        raise RuntimeError("an embedded runtime chunk holds 'python3'; change CHUNK_CHARS")
    return chunks


BOOTSTRAP = '''

def __vsp_unpack_runtime():
    """Unpacks the runtime the command wrote beside this program; puts it first on sys.path."""
    import base64, io, lzma, os, sys, tarfile, tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "vsp_runtime.b64"), "rb") as handle:
        archive = lzma.decompress(base64.b64decode(handle.read()))
    target = tempfile.mkdtemp(prefix="vsp-runtime-")
    with tarfile.open(fileobj=io.BytesIO(archive)) as files:
        if hasattr(tarfile, "data_filter"):
            files.extractall(target, filter="data")
        else:
            files.extractall(target)
    sys.path.insert(0, target)


__vsp_unpack_runtime()
'''
_KFP_IMPORTS_END = "from typing import *\n"
_PROGRAM_WRITE = 'printf "%s" "$0" > "$program_path/ephemeral_component.py"\n'
_PIP_STAGE_RUN = '&& "$0" "$@"'
_EXECUTOR_STAGE_RUN = "_KFP_RUNTIME=true python3 -m kfp.dsl.executor_main"


def _shape_error(what: str) -> RuntimeError:
    return RuntimeError(
        f"kfp's component command changed shape; cannot {what}. Fix: update "
        "vsp.components.packaging for this kfp version."
    )


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
        raise _shape_error("make the step exec into Python")
    index = executor_stages[0]
    rewritten[index] = rewritten[index].replace(
        _EXECUTOR_STAGE_RUN, "_KFP_RUNTIME=true exec python3 -m kfp.dsl.executor_main"
    )
    for index in pip_stages:
        head, _, tail = rewritten[index].rpartition(_PIP_STAGE_RUN)
        rewritten[index] = f'{head}&& exec "$0" "$@"{tail}'
    return rewritten


def embed_runtime(command: list[str], chunks: list[str]) -> list[str]:
    """kfp's command with the runtime's chunks after the program (see module docstring).

    Raises:
        RuntimeError: The command does not have the shape this rewrite knows.
    """
    stages = [i for i, part in enumerate(command) if _PROGRAM_WRITE in part]
    if len(stages) != 1 or stages[0] != len(command) - 2:
        raise _shape_error("embed the runtime")
    stage, program = command[-2], command[-1]
    if _KFP_IMPORTS_END not in program or "__KFP_EMBEDDED_ARCHIVE_B64" in program:
        raise _shape_error("embed the runtime")
    names = " ".join(f'"${n}"' for n in range(1, len(chunks) + 1))
    write = f'printf "%s" {names} > "$program_path/{RUNTIME_FILE}"\nshift {len(chunks)}\n'
    stage = stage.replace(_PROGRAM_WRITE, _PROGRAM_WRITE + write, 1)
    program = program.replace(_KFP_IMPORTS_END, _KFP_IMPORTS_END + BOOTSTRAP, 1)
    return [*command[:-2], stage, program, *chunks]


def embedded_files(command: list[str]) -> dict[str, bytes]:
    """The files a compiled component's command carries, by path in the archive.

    Raises:
        ValueError: The command carries no embedded runtime.
    """
    stages = [i for i, part in enumerate(command) if RUNTIME_FILE in part and "printf" in part]
    if len(stages) != 1:
        raise ValueError("the command carries no embedded runtime")
    archive = lzma.decompress(base64.b64decode("".join(command[stages[0] + 2 :])))
    with tarfile.open(fileobj=io.BytesIO(archive)) as files:
        members = [info for info in files.getmembers() if info.isfile()]
        return {info.name: files.extractfile(info).read() for info in members}


def build_component(func: Callable, options: ImageOptions) -> Callable:
    """Turns a component function into a KFP component with the embedded runtime.

    Args:
        func: The component function (its body imports from ``vsp.components.runtime``).
        options: Image and install choice.
    """
    component = dsl.component(
        func,
        base_image=options.base_image,
        packages_to_install=list(RUNTIME_REQUIREMENTS) if options.install_packages else [],
        install_kfp_package=options.install_packages,
    )
    own = frozenset(component_module_imports(func).values())
    files = runtime_files(component_modules(func), own)
    container = component.component_spec.implementation.container
    chunks = runtime_chunks(runtime_archive(files))
    container.command = embed_runtime(exec_in_place(container.command), chunks)
    return component
