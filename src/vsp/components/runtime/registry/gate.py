"""The evaluation gate: whether a new model version may take the ``default`` alias.

A gate is one comparison, ``METRIC OP VALUE``, with ``OP`` one of ``<``, ``<=``, ``>``, ``>=``
and ``VALUE`` a number, or ``default`` for the same metric of the version that holds ``default``
now (its imported ModelEvaluation): ``eval_loss <= 0.35``, ``final_loss < default``. The metrics
are a flat JSON object of numbers (the trainer's ``metrics.json`` in the model directory, or an
evaluation's output). The version is registered whatever the verdict; only the alias waits for
a pass. Against ``default`` with no default version yet, or one without that metric, the gate
passes (nothing to be worse than), and says so. Hand-rolled: one regular expression.
"""

from __future__ import annotations

import dataclasses
import json
import math
import operator
import re
from collections.abc import Mapping
from typing import Any

from vsp.components.runtime.core import errors, gcs_paths

BASELINE = "default"
OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_GATE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(<=|>=|<|>)\s*(\S+)\s*")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the gate said: ``passed``, and one sentence why."""

    passed: bool
    reason: str


@dataclasses.dataclass(frozen=True)
class Gate:
    """One comparison (see the module docstring); ``threshold`` None = the default version."""

    metric: str
    op: str
    threshold: float | None

    @classmethod
    def parse(cls, text: str) -> Gate | None:
        """The gate in ``text``; None for ''.

        Raises:
            errors.UserError: ``text`` is not ``METRIC OP VALUE``.
        """
        if not (text or "").strip():
            return None
        found = _GATE.fullmatch(text)
        value = found.group(3) if found else ""
        threshold = None
        if found and value != BASELINE:
            try:
                threshold = float(value)
            except ValueError:
                found = None
        if not found or (threshold is not None and not math.isfinite(threshold)):
            raise errors.UserError(
                f"gate {text!r:.80} is not METRIC OP VALUE. Fix: write e.g. 'eval_loss <= 0.35' "
                "or 'final_loss < default' (OP one of <, <=, >, >=; VALUE a number or 'default')."
            )
        return cls(found.group(1), found.group(2), threshold)

    def judge(self, metrics: Mapping[str, float], baseline: Mapping[str, float] | None) -> Verdict:
        """The verdict for this run's ``metrics`` against ``baseline`` (the default version's).

        Raises:
            errors.UserError: The run's metrics lack the gate's metric.
        """
        if self.metric not in metrics:
            raise errors.UserError(
                f"the gate needs metric {self.metric!r}, which the run's metrics do not have "
                f"(they have {', '.join(sorted(metrics)) or 'none'}). Fix: have the trainer or "
                "the evaluation write it, or gate on one of those."
            )
        value = metrics[self.metric]
        if self.threshold is None and (baseline is None or self.metric not in baseline):
            return Verdict(True, f"{self.metric} = {value:g}; no default version with that "
                           "metric to compare with, so the gate passes")  # fmt: skip
        bound = self.threshold if self.threshold is not None else baseline[self.metric]
        against = "" if self.threshold is not None else " (the default version's)"
        passed = OPERATORS[self.op](value, bound)
        sign = self.op if passed else {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}[self.op]
        return Verdict(passed, f"{self.metric} = {value:g} {sign} {bound:g}{against}")


def numbers(raw: Any) -> dict[str, float]:
    """The finite numbers at the top level of a JSON object (others are left out)."""
    if not isinstance(raw, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in raw.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


def read_metrics(path: str) -> dict[str, float]:
    """The numeric metrics of a JSON file (``gs://`` or a local/FUSE path).

    Raises:
        errors.UserError: The file cannot be read or is not a JSON object.
    """
    local = gcs_paths.to_local_path(path)
    try:
        raw = json.loads(local.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise errors.UserError(
            f"cannot read the gate's metrics from {path}: {exc}. Fix: point metrics_file at a "
            "JSON object of numbers, or leave it '' for the model directory's metrics.json."
        ) from exc
    if not isinstance(raw, dict):
        raise errors.UserError(f'{path} is not a JSON object. Fix: write {{"NAME": NUMBER}}.')
    return numbers(raw)
