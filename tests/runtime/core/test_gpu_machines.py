"""Machine types against the GPUs they come with or accept, before any request is sent."""

from __future__ import annotations

import pytest

from vsp.components.runtime.core import gpu_machines


@pytest.mark.parametrize(
    ("machine", "gpus"),
    [
        ("a2-highgpu-1g", ("NVIDIA_TESLA_A100", 1)),
        ("a2-megagpu-16g", ("NVIDIA_TESLA_A100", 16)),
        ("a2-ultragpu-8g", ("NVIDIA_A100_80GB", 8)),
        ("a3-highgpu-8g", ("NVIDIA_H100_80GB", 8)),
        ("a3-highgpu-4g", ("NVIDIA_H100_80GB", 4)),
        ("a3-megagpu-8g", ("NVIDIA_H100_MEGA_80GB", 8)),
        ("a3-ultragpu-8g", ("NVIDIA_H200_141GB", 8)),
        ("a4-highgpu-8g", ("NVIDIA_B200", 8)),
        ("a4x-highgpu-4g", ("NVIDIA_GB200", 4)),
        ("g2-standard-8", ("NVIDIA_L4", 1)),
        ("g2-standard-24", ("NVIDIA_L4", 2)),
        ("g2-standard-96", ("NVIDIA_L4", 8)),
        ("g4-standard-192", ("NVIDIA_RTX_PRO_6000", 4)),
        ("n1-standard-8", None),
        ("n2-standard-8", None),
        ("a9-hypergpu-8g", None),
        ("g2-standard-7", None),  # no such size: not judged
    ],
)
def test_fixed_gpu_machines_name_their_model_and_count(machine, gpus):
    assert gpu_machines.built_in(machine) == gpus


@pytest.mark.parametrize(
    ("machine", "kind", "count"),
    [
        ("a3-highgpu-8g", "NVIDIA_H100_80GB", 8),
        ("g2-standard-24", "NVIDIA_L4", 2),
        ("n1-standard-8", "NVIDIA_TESLA_T4", 2),
        ("n1-standard-8", "", 0),
        ("n2-standard-8", "", 0),
        ("a9-hypergpu-8g", "NVIDIA_X", 8),  # a family this version does not know
        ("z9-standard-8", "NVIDIA_L4", 1),
    ],
)
def test_matching_or_unknown_combinations_pass(machine, kind, count):
    assert gpu_machines.mismatch(machine, kind, count) is None


@pytest.mark.parametrize(
    ("machine", "kind", "count", "field", "problem"),
    [
        ("a3-highgpu-8g", "NVIDIA_B200", 8, "accelerator_type", "comes with NVIDIA_H100_80GB, not"),
        ("a3-highgpu-8g", "NVIDIA_H100_80GB", 4, "accelerator_count", "comes with 8 GPUs, not 4"),
        ("a3-highgpu-8g", "", 0, "accelerator_type", "names no accelerator"),
        ("g2-standard-48", "NVIDIA_L4", 1, "accelerator_count", "comes with 4 GPUs"),
        ("n1-standard-8", "NVIDIA_H100_80GB", 1, "accelerator_type", "N1 machines take"),
        ("n2-standard-8", "NVIDIA_TESLA_T4", 1, "accelerator_type", "takes no GPUs"),
    ],
)
def test_mismatches_name_the_field_and_the_machine_type_that_fits(
    machine, kind, count, field, problem
):
    found = gpu_machines.mismatch(machine, kind, count)
    assert found is not None
    assert found.field == field
    assert problem in found.problem
    if gpu_machines.built_in(machine):
        model, gpus = gpu_machines.built_in(machine)
        assert f"accelerator_type {model} and accelerator_count {gpus}" in found.fix


@pytest.mark.parametrize(
    ("machine", "problem", "fix"),
    [
        (
            "a3-higpu-8g",
            "a3-higpu-8g is not a Compute Engine machine type",
            "did you mean a3-highgpu-8g?",
        ),
        ("a3-ultra-8g", "(a3-ultragpu comes as a3-ultragpu-8g)", "did you mean a3-ultragpu-8g?"),
        ("g2-standrd-24", "not a Compute Engine machine type", "did you mean g2-standard-24?"),
        ("a3-highgpu-8", "not a3-highgpu-8.", "did you mean a3-highgpu-8g?"),
        ("a3-highgpu-3g", "a3-highgpu comes as a3-highgpu-1g, a3-highgpu-2g", "pick one of those."),
        ("a2-megagpu-8g", "a2-megagpu comes as a2-megagpu-16g;", "did you mean a2-megagpu-16g?"),
        (
            "g2-standard-7",
            "g2-standard comes as g2-standard-4, g2-standard-8,",
            "pick one of those.",
        ),
    ],
)
def test_a_misspelt_or_missized_gpu_machine_type_is_named_with_the_one_meant(machine, problem, fix):
    found = gpu_machines.unknown_type(machine)
    assert found is not None
    assert (found.field, found.value) == ("machine_type", machine)
    assert problem in found.problem
    assert found.fix == fix


@pytest.mark.parametrize(
    "machine",
    [
        "a3-highgpu-8g",
        "a3-highgpu-8g-nolssd",  # a suffix after a known size is not judged
        "a4x-highgpu-4g",
        "g4-standard-384",
        "a4x-maxgpu-4g",  # a family of a known series not close to a known one: a newer type
        "a9-hypergpu-8g",  # a series this version does not know
        "n1-standard-8",  # close to g2-standard by spelling, but another series
        "n2-standard-8",
        "e2-medium",
    ],
)
def test_known_and_unjudged_machine_types_pass(machine):
    assert gpu_machines.unknown_type(machine) is None
