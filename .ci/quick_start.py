"""Prints the README's quick-start commands, one per line, for ``.ci/run`` to run as written.

The commands are the lines of the first ``bash`` block under the ``## Quick start`` heading,
each without its trailing ``# comment``. Standard library only: it runs before anything is
installed.
"""

from __future__ import annotations

import pathlib
import shlex
import sys


def quick_start(readme: str) -> list[str]:
    """The commands of the quick start's first ``bash`` block.

    Raises:
        SystemExit: The README has no such section or block, or the block is empty.
    """
    lines = readme.splitlines()
    try:
        section = lines.index("## Quick start")
    except ValueError:
        raise SystemExit("README.md has no '## Quick start' heading") from None
    commands: list[str] = []
    inside = False
    for line in lines[section + 1 :]:
        if line.startswith("## "):
            break
        if not inside:
            inside = line.strip() == "```bash"
            continue
        if line.strip() == "```":
            break
        words = shlex.split(line, comments=True)
        if words:
            commands.append(strip_comment(line))
    if not commands:
        raise SystemExit("README.md's quick start has no bash block with commands")
    return commands


def strip_comment(line: str) -> str:
    """The line up to its first ``#`` outside quotes, without trailing blanks."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


if __name__ == "__main__":
    path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    print("\n".join(quick_start(path.read_text())))
