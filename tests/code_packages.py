"""Staged-code packages for tests: a tiny trainer tarball and wheels, built offline.

``trainer_tarball(folder, version)`` packs a standard-library trainer that logs
``code version VERSION`` with the version of a dependency it imports, and writes a model
directory whose manifest verifies (``trainer.manifests``). Its ``requirements.txt`` names a
wheel built here (``dependency_wheel``) by path, so the job's ``pip install`` needs no index.
"""

from __future__ import annotations

import base64
import hashlib
import pathlib
import zipfile

from vsp.pipelines.cli import code_pack

TRAINER = """\
import hashlib, json, os, pathlib, sys
import vspdep

version = pathlib.Path("VERSION").read_text().strip()
print(f"code version {version} (vspdep {vspdep.VERSION}, cwd {os.getcwd()}, "
      f"python {sys.executable}, sha256 {os.environ.get('VSP_CODE_SHA256', '')})", flush=True)
model = pathlib.Path(os.environ["VSP_MODEL_DIR"])
model.mkdir(parents=True, exist_ok=True)
data = f"trained by code {version}".encode()
(model / "model.npz").write_bytes(data)
files = {"model.npz": {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}}
manifest = {"format": "vsp-model", "format_version": 1, "files": files, "step": 1}
(model / "manifest.json").write_text(json.dumps(manifest))
"""


def wheel(folder: pathlib.Path, name: str, version: str, modules: dict[str, str]) -> pathlib.Path:
    """A pure-Python ``NAME-VERSION-py3-none-any.whl`` holding ``modules`` (file -> text)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        **{path: text.encode() for path, text in modules.items()},
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return out


def dependency_wheel(folder: pathlib.Path, version: str = "1.0") -> pathlib.Path:
    """The wheel of ``vspdep``, a module with ``VERSION``."""
    return wheel(folder, "vspdep", version, {"vspdep.py": f"VERSION = {version!r}\n"})


def trainer_source(folder: pathlib.Path, version: str, dep: pathlib.Path) -> pathlib.Path:
    """A folder with the trainer, its VERSION and a requirements.txt naming ``dep``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(TRAINER)
    (folder / "VERSION").write_text(version + "\n")
    (folder / "requirements.txt").write_text(f"{dep}\n")
    return folder


def trainer_tarball(folder: pathlib.Path, version: str) -> tuple[pathlib.Path, str]:
    """The trainer of ``version`` packed as ``vsp code`` does: (tarball path, sha256)."""
    dep = dependency_wheel(folder / "wheels")
    source = trainer_source(folder / f"src-{version}", version, dep)
    out = folder / f"code-{version}.tar.gz"
    out.write_bytes(code_pack.pack(source))
    return out, hashlib.sha256(out.read_bytes()).hexdigest()
