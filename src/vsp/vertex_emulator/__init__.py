"""A local HTTP emulator of the Vertex AI REST surfaces this project calls.

Start one in-process with ``EmulatorServer(state_dir).start()`` or from a shell with
``python -m vsp.vertex_emulator --state-dir D --port P``; point clients at it with
``VERTEX_EMULATOR_HOST=host:port``.
"""

from __future__ import annotations

from vsp.vertex_emulator.config import EmulatorSettings
from vsp.vertex_emulator.fault_rules import FaultRule
from vsp.vertex_emulator.journal import read_journal
from vsp.vertex_emulator.server import EmulatorServer, serve
from vsp.vertex_emulator.slurm.filesystem import cluster_home

__all__ = [
    "EmulatorServer",
    "EmulatorSettings",
    "FaultRule",
    "cluster_home",
    "read_journal",
    "serve",
]
