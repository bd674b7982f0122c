"""Reading a compiled component YAML the way the step container sees it.

``CompiledStep.load(name)`` gives the executor's exact ``command``, the pip requirements its
install stage lists, the embedded runtime archive's module names and the program text kfp writes
to ``ephemeral_component.py``.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shlex

import yaml

from vsp.components import packaging

REPO = pathlib.Path(__file__).resolve().parents[2]
COMPILED = REPO / "src" / "vsp" / "compiled"


@dataclasses.dataclass(frozen=True)
class CompiledStep:
    """One compiled component: its container command and what it carries."""

    name: str
    command: list[str]
    args: list[str]
    image: str

    @classmethod
    def load(cls, name: str) -> CompiledStep:
        spec = yaml.safe_load((COMPILED / "components" / f"{name}.yaml").read_text())
        [container] = [e["container"] for e in spec["deploymentSpec"]["executors"].values()]
        return cls(name, container["command"], container["args"], container["image"])

    @property
    def install_stage(self) -> str:
        """The ``sh -c`` text that pip-installs the requirements, then execs the next stage."""
        assert self.command[:2] == ["sh", "-c"], self.command[:2]
        return self.command[2]

    @property
    def program(self) -> str:
        """The Python source kfp writes to ``ephemeral_component.py``."""
        return self.command[self.program_index]

    @property
    def runtime_chunks(self) -> list[str]:
        """The embedded runtime's command arguments, after the program."""
        return self.command[self.program_index + 1 :]

    @property
    def program_index(self) -> int:
        """Where the program is in ``command`` (after the shell stage that writes it)."""
        (stage,) = [i for i, part in enumerate(self.command) if "ephemeral_component.py" in part]
        return stage + 1

    def requirements(self) -> list[str]:
        """Every requirement the install stage passes to pip (flags dropped)."""
        found = []
        for line in self.install_stage.splitlines():
            if "pip install" not in line:
                continue
            for segment in line.split("&&"):
                words = shlex.split(segment)
                if "install" not in words:
                    continue
                tail = words[words.index("install") + 1 :]
                found += [w for w in tail if not w.startswith("-") and w not in ('"$0"', "$0")]
        return [r for r in found if "python_version<" not in r]

    def write_program(self, folder: pathlib.Path) -> pathlib.Path:
        """Writes the program and the runtime beside it, as the step's shell stage does."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / packaging.RUNTIME_FILE).write_text("".join(self.runtime_chunks))
        program = folder / "ephemeral_component.py"
        program.write_text(self.program)
        return program

    def embedded_files(self) -> dict[str, bytes]:
        """The embedded archive's files by path (``vsp/components/runtime/core/rest.py``)."""
        return packaging.embedded_files(self.command)

    def runtime_modules(self) -> list[str]:
        """Dotted names of the embedded runtime modules."""
        return sorted(
            path[: -len(".py")].replace("/", ".").removesuffix(".__init__")
            for path in self.embedded_files()
            if path.endswith(".py")
        )


def component_names() -> list[str]:
    return sorted(p.stem for p in (COMPILED / "components").glob("*.yaml"))
