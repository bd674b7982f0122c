"""Puts the repository root on ``sys.path``: ``benchmarks`` is not an installed package.

``python -m pytest`` (``make test``) already has it there; plain ``pytest`` does not, and would
otherwise resolve ``benchmarks`` to this test folder.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = str(pathlib.Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
