"""The README's quick start is two commands, and `.ci/run` reads exactly those."""

from __future__ import annotations

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def quick_start(readme: str) -> subprocess.CompletedProcess:
    path = REPO / ".ci" / "quick_start.py"
    return subprocess.run(
        [sys.executable, str(path), "/dev/stdin"], input=readme, capture_output=True, text=True
    )


def test_the_readme_quick_start_is_the_main_job_then_the_tests():
    done = quick_start((REPO / "README.md").read_text())
    assert done.returncode == 0, done.stderr
    commands = done.stdout.splitlines()
    assert len(commands) == 2
    assert commands[0].endswith("vsp run-local")
    assert commands[1].endswith("python -m pytest -q")
    assert all(c.startswith('pip install -e ".[dev]" && ') for c in commands)


def test_comments_are_dropped_and_a_missing_section_is_refused():
    readme = "# x\n\n## Quick start\n\n```bash\na 'b # c' && d  # run\n\n# only a comment\n```\n"
    assert quick_start(readme).stdout.splitlines() == ["a 'b # c' && d"]
    missing = quick_start("# x\n\n## Elsewhere\n")
    assert missing.returncode != 0 and "Quick start" in missing.stderr
