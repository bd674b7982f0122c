"""Compiles every pipeline and component into reproducible YAML templates.

``compile_all(out_dir)`` writes ``{out_dir}/pipelines/<name>.yaml`` and
``{out_dir}/components/<name>.yaml``. kfp's embedded runtime archive records file times and a
gzip timestamp, so the same sources would give a different file at every compile; after kfp
writes a file, ``normalise_embedded_archives`` re-packs each archive with fixed times, owners
and modes, in name order, which makes the output a pure function of the sources.
"""

from __future__ import annotations

import base64
import gzip
import io
import os
import pathlib
import re
import tarfile
import tempfile

from kfp import compiler

from vsp.components import catalog, packaging
from vsp.pipelines import registry

EMBEDDED_ARCHIVE = re.compile(r"__KFP_EMBEDDED_ARCHIVE_B64 = '([A-Za-z0-9+/=]+)'")


def archive_members(archive_b64: str) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """The members of an embedded archive (base64 of a gzipped tar) with each file's bytes."""
    raw = gzip.decompress(base64.b64decode(archive_b64))
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as source:
        for info in source.getmembers():
            data = source.extractfile(info).read() if info.isfile() else None
            members.append((info, data))
    return members


def _repack(archive_b64: str) -> str:
    members = archive_members(archive_b64)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as target:
        for info, data in sorted(members, key=lambda m: m[0].name):
            clean = tarfile.TarInfo(info.name)
            clean.type = info.type
            clean.mode = 0o755 if info.isdir() else 0o644
            clean.mtime = 0
            clean.uid = clean.gid = 0
            clean.uname = clean.gname = ""
            if data is not None:
                clean.size = len(data)
                target.addfile(clean, io.BytesIO(data))
            else:
                target.addfile(clean)
    return base64.b64encode(gzip.compress(out.getvalue(), mtime=0)).decode("ascii")


def normalise_embedded_archives(text: str) -> str:
    """Re-packs every embedded runtime archive in a compiled YAML text deterministically."""
    return EMBEDDED_ARCHIVE.sub(
        lambda m: f"__KFP_EMBEDDED_ARCHIVE_B64 = '{_repack(m.group(1))}'", text
    )


def _compile_one(obj, path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, path.name)
        compiler.Compiler().compile(obj, raw)
        text = pathlib.Path(raw).read_text()
    path.write_text(normalise_embedded_archives(text))


def compile_all(
    out_dir: str | os.PathLike, options: packaging.ImageOptions = packaging.STOCK_IMAGE
) -> list[pathlib.Path]:
    """Compiles all pipelines and components.

    Args:
        out_dir: Destination folder (``compiled/`` in the repository).
        options: Base image choice; the default is a stock Python image with pip installs.

    Returns:
        The written files, sorted.
    """
    out = pathlib.Path(out_dir)
    components = catalog.component_set(options)
    written = []
    for name, component in sorted(components.items()):
        path = out / "components" / f"{name}.yaml"
        _compile_one(component, path)
        written.append(path)
    for name, build in sorted(registry.PIPELINES.items()):
        path = out / "pipelines" / f"{name.replace('-', '_')}.yaml"
        _compile_one(build(components), path)
        written.append(path)
    return sorted(written)
