"""Running the payload in a container image through pyxis (``srun --container-image``).

Pyxis (https://github.com/NVIDIA/pyxis) is a SPANK plugin: listed in the cluster's
``plugstack.conf``, it adds ``--container-image`` and its other ``--container-*`` options to
``srun`` on the nodes where it is installed, and runs each task in an enroot container. A
cluster tells that it has it by exactly that: ``srun --help`` lists ``--container-image``
(pyxis' own installation check). Neither the Slurm REST API nor the Vertex AI cluster resource
shows SPANK plugins, so the step relies on the cluster's label ``PYXIS_LABEL=yes``, set by
whoever installed pyxis on it, and the batch script checks ``srun --help`` again on the node
before starting anything (``guard``).
"""

from __future__ import annotations

PYXIS_LABEL = "slurm-pyxis"  # a user label of the cluster: "yes" = its nodes have pyxis
NO_PYXIS = 96  # the job's exit code when the node's srun has no --container-image
_FORBIDDEN = (",", ":", "\0", "\n")

_GUARD = """# Container image: pyxis must add --container-image to srun on this node.
if ! srun --help 2>/dev/null | grep -q -- '--container-image'; then
  echo "vsp: srun on $(hostname) has no --container-image (no pyxis): not starting the payload" >&2
  _vsp_beacon exiting {code}
  exit {code}
fi
"""


def guard() -> str:
    """The bash that ends the job with ``NO_PYXIS`` when the node's srun lacks pyxis."""
    return _GUARD.replace("{code}", str(NO_PYXIS))


def srun_prefix(image: str, working_directory: str, mounts: list[str]) -> list[str]:
    """The argv before the trainer's: one ``srun`` step in ``image`` (each task in it).

    Args:
        image: An enroot image reference (``nvcr.io#nvidia/pytorch:24.08-py3``) or a squashfs
            path on the nodes.
        working_directory: The job's directory, mounted at the same path and entered.
        mounts: Further folders mounted at the same path (the GCS FUSE root, ...).

    Raises:
        ValueError: An empty image, or a path with ``,`` or ``:`` (pyxis' separators).
    """
    if not image.strip() or "\0" in image or "\n" in image:
        raise ValueError(f"not a container image: {image!r}")
    folders = [f for f in dict.fromkeys([working_directory, *mounts]) if f]
    for folder in folders:
        if any(c in folder for c in _FORBIDDEN):
            raise ValueError(f"a mounted folder cannot contain , or : ({folder!r})")
    argv = ["srun", f"--container-image={image}", "--container-mount-home"]
    if folders:
        argv.append("--container-mounts=" + ",".join(f"{f}:{f}" for f in folders))
    if working_directory:
        argv.append(f"--container-workdir={working_directory}")
    return argv
