"""Which GPUs a Compute Engine machine type comes with or accepts.

The accelerator-optimized families come with a fixed GPU model and count: the machine type names
both, and Vertex AI refuses a request whose ``accelerator_type`` or ``accelerator_count`` differs.
N1 machines take attached GPUs of the older models only; the general-purpose and compute-optimized
families below take none. Families not listed (newer ones) are not judged.

Facts from Compute Engine's GPU machine types page (read 2026-12): A2 Standard (``a2-highgpu``,
``a2-megagpu``) A100 40GB; A2 Ultra A100 80GB; A3 High and Edge H100 80GB; A3 Mega H100 Mega 80GB;
A3 Ultra H200; A4 B200; A4X GB200 (4 per machine); G2 L4 (1 per machine up to g2-standard-32 save
g2-standard-24 with 2, then 4 and 8); G4 RTX PRO 6000 (1, 2, 4, 8 for 48, 96, 192, 384 vCPUs).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any

# Family prefix (machine type up to the last "-") -> the accelerator enum name it comes with.
_FIXED_MODEL = {
    "a2-highgpu": "NVIDIA_TESLA_A100",
    "a2-megagpu": "NVIDIA_TESLA_A100",
    "a2-ultragpu": "NVIDIA_A100_80GB",
    "a3-highgpu": "NVIDIA_H100_80GB",
    "a3-edgegpu": "NVIDIA_H100_80GB",
    "a3-megagpu": "NVIDIA_H100_MEGA_80GB",
    "a3-ultragpu": "NVIDIA_H200_141GB",
    "a4-highgpu": "NVIDIA_B200",
    "a4x-highgpu": "NVIDIA_GB200",
    "g2-standard": "NVIDIA_L4",
    "g4-standard": "NVIDIA_RTX_PRO_6000",
}
# GPUs per machine where the name's size is vCPUs rather than "<N>g".
_G2_COUNTS = {4: 1, 8: 1, 12: 1, 16: 1, 24: 2, 32: 1, 48: 4, 96: 8}
_G4_COUNTS = {48: 1, 96: 2, 192: 4, 384: 8}
N1_GPUS = frozenset(
    {"NVIDIA_TESLA_T4", "NVIDIA_TESLA_V100", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_P4",
     "NVIDIA_TESLA_K80"}
)  # fmt: skip
# The series whose every family is listed in _SIZES (judged by ``unknown_type``).
_SERIES = frozenset(family.split("-")[0] for family in _FIXED_MODEL)
# The sizes each fixed-GPU family comes in (the name's part after the family, read 2026-12).
_SIZES = {
    "a2-highgpu": ("1g", "2g", "4g", "8g"),
    "a2-megagpu": ("16g",),
    "a2-ultragpu": ("1g", "2g", "4g", "8g"),
    "a3-highgpu": ("1g", "2g", "4g", "8g"),
    "a3-edgegpu": ("8g",),
    "a3-megagpu": ("8g",),
    "a3-ultragpu": ("8g",),
    "a4-highgpu": ("8g",),
    "a4x-highgpu": ("4g",),
    "g2-standard": tuple(str(size) for size in _G2_COUNTS),
    "g4-standard": tuple(str(size) for size in _G4_COUNTS),
}
_NO_GPU_FAMILIES = frozenset(
    {"e2", "n2", "n2d", "n4", "c2", "c2d", "c3", "c3d", "c4", "c4a", "c4d", "h3", "m1", "m2",
     "m3", "t2a", "t2d"}
)  # fmt: skip
_SIZED = re.compile(r"^(?P<family>[a-z0-9]+-[a-z]+)-(?P<size>\d+)(?P<g>g?)(?:-[a-z0-9]+)?$")


@dataclasses.dataclass(frozen=True)
class GpuMismatch:
    """What is wrong with a machine's accelerator and how to fix it."""

    field: str  # "accelerator_type" or "accelerator_count"
    value: Any  # the field's value (None for a missing accelerator type)
    problem: str
    fix: str


def built_in(machine_type: str) -> tuple[str, int] | None:
    """The GPU model and count a fixed-GPU machine type comes with, or ``None``.

    ``a3-highgpu-8g`` is ``("NVIDIA_H100_80GB", 8)``, ``g2-standard-24`` ``("NVIDIA_L4", 2)``.
    """
    match = _SIZED.match(machine_type)
    if not match or match["family"] not in _FIXED_MODEL:
        return None
    family, size = match["family"], int(match["size"])
    model = _FIXED_MODEL[family]
    if family == "g2-standard":
        count = _G2_COUNTS.get(size)
    elif family == "g4-standard":
        count = _G4_COUNTS.get(size)
    else:
        count = size if match["g"] else None
    return (model, count) if count else None


def unknown_type(machine_type: str) -> GpuMismatch | None:
    """Why ``machine_type`` is no machine type of a fixed-GPU series, or ``None``.

    Judged only for the series this module knows (A2, A3, A4, A4X, G2, G4): a size the family
    does not come in (``a3-highgpu-3g``, ``g2-standard-7``), or a family one typo away from a
    known one (``a3-higpu-8g``). A family of those series that is not close to a known one (one
    Compute Engine added since) is not judged, nor are the other series.

    Args:
        machine_type: e.g. ``a3-highgpu-8g``.
    """
    parts = machine_type.split("-")
    family, size = "-".join(parts[:2]), (parts[2] if len(parts) > 2 else "")
    if family in _SIZES:
        if size in _SIZES[family]:
            return None
        problem = f"{family} comes as {_names(family)}; not {machine_type}."
    elif parts[0] in _SERIES:
        known = [name for name in _SIZES if name.startswith(f"{parts[0]}-")]
        near = difflib.get_close_matches(family, known, n=1, cutoff=0.75)
        if not near:
            return None
        family = near[0]
        problem = (
            f"{machine_type} is not a Compute Engine machine type ({family} comes as "
            f"{_names(family)})."
        )
    else:
        return None
    if size in _SIZES[family] or len(_SIZES[family]) == 1:
        guess = [size] if size in _SIZES[family] else list(_SIZES[family])
    else:
        guess = difflib.get_close_matches(size, _SIZES[family], n=1, cutoff=0.6)
    fix = f"did you mean {family}-{guess[0]}?" if guess else "pick one of those."
    return GpuMismatch("machine_type", machine_type, problem, fix)


def _names(family: str) -> str:
    return ", ".join(f"{family}-{size}" for size in _SIZES[family])


def mismatch(
    machine_type: str, accelerator_type: str, accelerator_count: int
) -> GpuMismatch | None:
    """Why the accelerators cannot go with ``machine_type``, or ``None`` when they can.

    Args:
        machine_type: e.g. ``a3-highgpu-8g``.
        accelerator_type: The accelerator enum name ('' for none).
        accelerator_count: GPUs per machine (0 for none).
    """
    fixed = built_in(machine_type)
    if fixed is not None:
        model, count = fixed
        fix = (
            f"set accelerator_type {model} and accelerator_count {count}, or pick the machine "
            f"type that comes with the GPUs you want."
        )
        if not accelerator_type:
            return GpuMismatch(
                "accelerator_type",
                None,
                f"{machine_type} comes with {count} x {model}; the request names no accelerator.",
                fix,
            )
        if accelerator_type != model:
            return GpuMismatch(
                "accelerator_type",
                accelerator_type,
                f"{machine_type} comes with {model}, not {accelerator_type}.",
                fix,
            )
        if accelerator_count != count:
            return GpuMismatch(
                "accelerator_count",
                accelerator_count,
                f"{machine_type} comes with {count} GPUs, not {accelerator_count}.",
                fix,
            )
        return None
    if not accelerator_type:
        return None
    family = machine_type.split("-", 1)[0]
    if family == "n1" and accelerator_type not in N1_GPUS:
        return GpuMismatch(
            "accelerator_type",
            accelerator_type,
            f"N1 machines take {', '.join(sorted(N1_GPUS))}; {accelerator_type} needs its own "
            "machine family.",
            "use the machine type that comes with it (e.g. a3-highgpu-8g for NVIDIA_H100_80GB, "
            "g2-standard-8 for NVIDIA_L4), or an N1 GPU.",
        )
    if family in _NO_GPU_FAMILIES:
        return GpuMismatch(
            "accelerator_type",
            accelerator_type,
            f"{machine_type} takes no GPUs.",
            "use a GPU machine type (e.g. a3-highgpu-8g, g2-standard-8, or n1-standard-8 with "
            "NVIDIA_TESLA_T4), or drop the accelerator.",
        )
    return None
