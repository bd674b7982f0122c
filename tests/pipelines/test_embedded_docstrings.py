"""The embedded runtime drops docstrings (kfp passes it as one argument under 128 KiB) and keeps
every statement the same."""

from __future__ import annotations

import ast
import pathlib

from vsp.components import packaging

RUNTIME = pathlib.Path(packaging.__file__).parent / "runtime"

SOURCE = '''"""Module doc, with ünïcode."""
import abc


class Base(abc.ABC):
    """Class doc
    on two lines."""

    @abc.abstractmethod
    def only_doc(self) -> int:
        """Nothing but a docstring: the body must stay valid."""

    def value(self) -> str:
        "short"; return "kept: not a docstring"


def outer() -> str:
    """Outer."""
    x = "ü"  # a comment stays

    def inner() -> str:
        """Inner."""
        return x

    return inner()
'''


def test_docstrings_become_empty_strings_and_the_code_runs_the_same(tmp_path):
    path = tmp_path / "mod.py"
    path.write_text(SOURCE, encoding="utf-8")
    stripped = packaging.without_docstrings(path).decode()
    for text in ("Module doc", "ünïcode", "Class doc", "Nothing but", "short", "Outer.", "Inner."):
        assert text not in stripped
    assert "# a comment stays" in stripped
    namespace: dict = {}
    exec(compile(stripped, "mod", "exec"), namespace)  # noqa: S102 - the test's own source
    assert namespace["outer"]() == "ü"
    assert namespace["Base"].value(None) == "kept: not a docstring"
    assert namespace["__doc__"] == ""


def test_every_runtime_module_is_stripped_with_its_statements_unchanged():
    modules = sorted(p for p in RUNTIME.rglob("*.py") if "__pycache__" not in p.parts)
    assert len(modules) > 50
    for path in modules:
        original = path.read_bytes()
        stripped = packaging.without_docstrings(path)
        tree = ast.parse(original)
        for node in packaging._docstrings(tree):
            node.value = ""
        assert ast.dump(ast.parse(stripped)) == ast.dump(tree), path
        assert len(stripped) < len(original), f"{path}: nothing stripped"
