"""requirements/runtime.in is what the compiled steps install; runtime.lock pins all of it.

Offline: the files are compared with the compiled templates and with each other; regenerating
the lock (``make lock``) needs the package index and is not done here.
"""

import pathlib
import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.components import compiled_steps
from tools import runtime_lock

REPO = pathlib.Path(__file__).resolve().parents[2]
RUNTIME_IN = REPO / "requirements" / "runtime.in"
RUNTIME_LOCK = REPO / "requirements" / "runtime.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def in_entries() -> list[str]:
    lines = (line.strip() for line in RUNTIME_IN.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def lock_pins(text: str) -> dict[str, str]:
    """``{canonical name: version}`` of every ``name==version`` line of a pip-compile lock."""
    return {
        canonicalize_name(m.group(1)): m.group(2)
        for m in (_PIN.match(line) for line in text.splitlines())
        if m
    }


def lock_hashes(text: str) -> dict[str, int]:
    """How many ``--hash`` lines follow each pin."""
    counts, current = {}, None
    for line in text.splitlines():
        match = _PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            counts[current] = 0
        elif line.strip().startswith("--hash=sha256:") and current:
            counts[current] += 1
    return counts


def lock_via(text: str) -> dict[str, set[str]]:
    """What pip-compile says each pin is there for (``# via`` annotations): the names of the
    packages that require it, or ``-r FILE`` for an input."""
    via, current, listing = {}, None, False
    for line in text.splitlines():
        match = _PIN.match(line)
        stripped = line.strip()
        if match:
            current, listing = canonicalize_name(match.group(1)), False
            via[current] = set()
        elif current and stripped.startswith("# via"):
            rest = stripped.removeprefix("# via").strip()
            listing = not rest
            if rest:
                via[current].add(rest)
        elif current and listing and stripped.startswith("#   "):
            via[current].add(stripped.removeprefix("#").strip())
    return {
        name: {r if r.startswith("-r ") else canonicalize_name(r) for r in reasons}
        for name, reasons in via.items()
    }


def unpinned(requirements: list[str], pins: dict[str, str]) -> list[str]:
    """The requirements the pins leave out or pin outside their range."""
    missing = []
    for text in requirements:
        requirement = Requirement(text)
        version = pins.get(canonicalize_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            missing.append(text)
    return missing


def test_runtime_in_is_the_union_of_what_the_compiled_steps_install():
    declared = set()
    for name in compiled_steps.component_names():
        declared.update(compiled_steps.CompiledStep.load(name).requirements())
    assert sorted(in_entries(), key=str.lower) == in_entries(), "keep runtime.in sorted"
    assert set(in_entries()) == declared, "run `make lock` and commit requirements/"
    assert len(in_entries()) == len(declared) == 7
    assert "google-cloud-pipeline-components" not in RUNTIME_IN.read_text()


def test_runtime_in_is_what_the_generator_writes():
    assert RUNTIME_IN.read_text() == runtime_lock.runtime_in_text()


def test_the_lock_pins_every_entry_within_its_range():
    pins = lock_pins(RUNTIME_LOCK.read_text())
    assert unpinned(in_entries(), pins) == []


def test_the_lock_holds_the_inputs_and_what_they_require_nothing_else():
    """A pin no input needs (left from a removed requirement) or one with no reason fails."""
    via = lock_via(RUNTIME_LOCK.read_text())
    inputs = {name for name, reasons in via.items() if "-r requirements/runtime.in" in reasons}
    assert inputs == {canonicalize_name(Requirement(e).name) for e in in_entries()}
    reasons = set().union(*via.values()) - {"-r requirements/runtime.in"}
    assert reasons <= set(via), "a pin is required by a package the lock lacks"
    assert [name for name, why in via.items() if not why] == []


def test_every_pin_has_a_hash_so_require_hashes_can_install_it():
    counts = lock_hashes(RUNTIME_LOCK.read_text())
    assert len(counts) == len(lock_pins(RUNTIME_LOCK.read_text())) > 7
    assert [name for name, n in counts.items() if n == 0] == []


def test_the_lock_was_made_for_python_3_11_with_the_project_options():
    header = RUNTIME_LOCK.read_text().split("\n\n")[0]
    assert f"pip-compile with Python {runtime_lock.LOCK_PYTHON}" in header
    command = next(line for line in header.splitlines() if "pip-compile --" in line)
    assert all(option in command.split() for option in runtime_lock.COMPILE_OPTIONS)
    assert "--index-url" not in RUNTIME_LOCK.read_text()
    assert "--find-links" not in RUNTIME_LOCK.read_text()


def test_the_checks_catch_a_missing_or_out_of_range_pin():
    pins = {"kfp": "2.17.3", "pyyaml": "5.4"}
    assert unpinned(["kfp==2.17.3", "PyYAML>=6,<7", "requests>=2.31,<3"], pins) == [
        "PyYAML>=6,<7",
        "requests>=2.31,<3",
    ]
    text = (
        "a==1 \\\n    --hash=sha256:00\n    # via\n    #   -r x.in\n    #   B_c\n"
        "b==2\n    # via a\n"
    )
    assert lock_hashes(text) == {"a": 1, "b": 0}
    assert lock_via(text) == {"a": {"-r x.in", "b-c"}, "b": {"a"}}


def test_the_generator_writes_the_committed_runtime_in(tmp_path):
    assert runtime_lock.main(["--dir", str(tmp_path)]) == 0
    assert (tmp_path / "runtime.in").read_text() == RUNTIME_IN.read_text()
    assert not (tmp_path / "runtime.lock").exists()


def test_the_lock_is_compiled_with_the_options_its_header_records(tmp_path):
    command = runtime_lock.compile_command(tmp_path)
    assert command[1:4] == ["-m", "piptools", "compile"]
    assert command[-3:] == [
        "--output-file",
        str(tmp_path / "runtime.lock"),
        str(tmp_path / "runtime.in"),
    ]
    assert [word for word in command if word in runtime_lock.COMPILE_OPTIONS] == list(
        runtime_lock.COMPILE_OPTIONS
    )
