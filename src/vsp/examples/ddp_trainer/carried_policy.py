"""The DDP example's checkpoint policy across restarts: a ``policy.json`` in each checkpoint.

Rank 0 alone decides when to save (``CheckpointPolicy.should_save``; the ranks agree through an
all-reduce at each step boundary), measures the saves and steps, and carries what the policy
learned into every checkpoint: rank 0 writes ``policy.json`` into the checkpoint's state folder
after every rank wrote its part and before it commits, so the manifest covers it. A process
that resumes from that checkpoint reads it back, counts one more preemption unless the
checkpoint was the final save (a retried step, not an interruption), and feeds the policy the
notice outcomes of the checkpoint history, as the numpy example does from its metadata.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from vsp.components.runtime.core import file_primitives
from vsp.components.runtime.trainer import history
from vsp.components.runtime.trainer import policy as checkpoint_policy

log = logging.getLogger("vsp.examples.ddp_trainer")

POLICY_FILE = "policy.json"
SCHEMA = "vsp-ddp-policy/1"


@dataclass
class Carried:
    """What the policy carries from earlier processes of the job.

    Attributes:
        resumes: Processes of the job that resumed after an interruption, this one included.
        run_seconds: Seconds the job ran before this process, up to the checkpoint it resumed
            from (time after that checkpoint is not known).
    """

    resumes: int = 0
    run_seconds: float = 0.0


def write(state_dir: Path, policy: checkpoint_policy.CheckpointPolicy, reason: str) -> None:
    """Writes the policy's state into a checkpoint's state folder (rank 0, before commit)."""
    body = {"schema": SCHEMA, "reason": reason, "policy": policy.state_dict()}
    file_primitives.write_file_atomic(state_dir / POLICY_FILE, json.dumps(body).encode())


def restore(
    policy: checkpoint_policy.CheckpointPolicy, root: Path, state_dir: Path | None
) -> Carried:
    """Loads what the checkpoint in ``state_dir`` carried (None: starting fresh) into the policy.

    A checkpoint written without the policy (an older run, or another writer) leaves the prior
    and counts the resume; the checkpoint history's notice outcomes are read in every case.

    Returns:
        The resumes and run time the policy now holds.
    """
    carried = Carried()
    if state_dir is not None:
        saved: dict = {}
        try:
            saved = json.loads((state_dir / POLICY_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            log.info("%s carries no checkpoint policy: starting from its prior", state_dir)
        except (OSError, ValueError) as exc:
            log.warning("unreadable %s (%s): starting from the policy's prior", POLICY_FILE, exc)
        state = saved.get("policy") if isinstance(saved, dict) else None
        if isinstance(state, dict):
            policy.load_state_dict(state)
        carried.resumes = policy.preemptions + (0 if saved.get("reason") == "final" else 1)
        carried.run_seconds = policy.run_seconds
        policy.observe(carried.resumes, carried.run_seconds)
    records = history.read(root)
    if records:
        policy.observe_notices(*history.notice_outcomes(records))
    return carried
