"""Staged code in the batch script: a pinned package unpacked once per digest, with its own venv.

``CodeStage`` names a package on Cloud Storage (a ``.tar.gz``/``.tgz`` source tarball or a
``.whl`` wheel) and its sha256. ``shell()`` is the bash the batch script runs before the
payload: the job itself, on the cluster, copies the package from the GCS FUSE mount
(``${VSP_GCS_FUSE_ROOT:-/gcs}/BUCKET/PATH``), checks its sha256 again (the object may have
changed since the step checked it), and builds ``CACHE/SHA256`` once:

* a fresh build folder ``CACHE/.build-SHA256-XXXXXX`` (``mktemp -d``, so concurrent jobs never
  share one) gets ``src/`` (the unpacked tarball, or the wheel file) and ``venv/``
  (``python3 -m venv``, then ``pip install -r src/requirements.txt`` when the tarball has one,
  or ``pip install`` of the wheel, which brings its dependencies);
* the build is published by creating the symlink ``CACHE/SHA256`` to it. ``symlink(2)`` is
  atomic and fails when the name exists, so the first finished job wins and a job that lost
  the race removes its own build and uses the winner's. A symlink rather than renaming the
  folder: a venv records its absolute path in its scripts, so it must stay where it was built;
* a ready build (``CACHE/SHA256/.vsp-ready``) is reused as is: later jobs and attempts of any
  run with the same digest skip the copy, the unpacking and the venv.

The payload then starts in ``CACHE/SHA256/src`` with ``CACHE/SHA256/venv/bin`` first on
``PATH`` (``VIRTUAL_ENV`` set) and ``VSP_CODE_SHA256`` and ``VSP_CODE_DIR`` in its environment.
A failed staging ends the job with exit code ``STAGE_FAILED`` before the payload starts.

``CACHE`` is ``cache_dir`` when given, else ``$HOME/.vsp/code`` read at run time: on a Vertex AI
training cluster the home is the shared Filestore every node mounts, so one build serves every
node and job, and a re-created cluster (new, empty home) builds it again from the pinned package.

Every value is quoted with ``shlex.quote``; the digest is 64 lowercase hex digits, checked here.
"""

from __future__ import annotations

import dataclasses
import re
import shlex

SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
TARBALL_SUFFIXES = (".tar.gz", ".tgz")
WHEEL_SUFFIX = ".whl"
STAGE_FAILED = 97  # the job's exit code when the code cannot be staged
CODE_SHA256_ENV = "VSP_CODE_SHA256"
CODE_DIR_ENV = "VSP_CODE_DIR"
PYTHON_ENV = "VSP_CODE_PYTHON"  # the cluster's Python that builds the venv (default python3)
DEFAULT_CACHE = "$HOME/.vsp/code"

# Not a format string: the staging function, inserted as is after the values it reads.
_STAGE = r"""_vsp_code_src="${VSP_GCS_FUSE_ROOT:-/gcs}/${_vsp_code_uri#gs://}"
_vsp_code_dir="$_vsp_code_cache/$_vsp_code_sha"
_vsp_stage_code() {
  local build got
  if [ -e "$_vsp_code_dir/.vsp-ready" ]; then
    echo "vsp: code $_vsp_code_sha: reusing $_vsp_code_dir" >&2
    return 0
  fi
  echo "vsp: code $_vsp_code_sha: staging $_vsp_code_uri into $_vsp_code_dir" >&2
  mkdir -p -- "$_vsp_code_cache" || return 1
  build=$(mktemp -d "$_vsp_code_cache/.build-$_vsp_code_sha-XXXXXX") || return 1
  if ! { mkdir -- "$build/src" && cp -- "$_vsp_code_src" "$build/package"; }; then
    rm -rf -- "$build"
    return 1
  fi
  got=$(sha256sum < "$build/package" | cut -d' ' -f1)
  if [ "$got" != "$_vsp_code_sha" ]; then
    echo "vsp: $_vsp_code_uri has sha256 $got, not the pinned $_vsp_code_sha: not running it" >&2
    rm -rf -- "$build"
    return 1
  fi
  if [ "$_vsp_code_kind" = wheel ]; then
    mv -- "$build/package" "$build/src/$_vsp_code_file" &&
      "${VSP_CODE_PYTHON:-python3}" -m venv -- "$build/venv" &&
      "$build/venv/bin/python" -m pip install -q -- "$build/src/$_vsp_code_file"
  else
    tar -xzf "$build/package" -C "$build/src" --no-same-owner && rm -f -- "$build/package" &&
      "${VSP_CODE_PYTHON:-python3}" -m venv -- "$build/venv" &&
      { [ ! -f "$build/src/requirements.txt" ] ||
        "$build/venv/bin/python" -m pip install -q -r "$build/src/requirements.txt"; }
  fi || {
    echo "vsp: code $_vsp_code_sha: building $build failed" >&2
    rm -rf -- "$build"
    return 1
  }
  : > "$build/.vsp-ready" || { rm -rf -- "$build"; return 1; }
  if ln -sT -- "$build" "$_vsp_code_dir" 2>/dev/null; then
    return 0
  elif [ -e "$_vsp_code_dir/.vsp-ready" ]; then  # another job published the digest first
    rm -rf -- "$build"
    return 0
  fi
  # A broken earlier publication (its build was removed): replace the link atomically.
  ln -s -- "$build" "$build.link" && mv -fT -- "$build.link" "$_vsp_code_dir"
}
if ! _vsp_stage_code; then
  echo "vsp: cannot stage the code of $_vsp_code_uri; not starting the payload" >&2
  _vsp_beacon exiting {failed}
  exit {failed}
fi
cd -- "$_vsp_code_dir/src" || exit {failed}
VIRTUAL_ENV="$_vsp_code_dir/venv"
PATH="$VIRTUAL_ENV/bin:${PATH:-/usr/bin:/bin}"
VSP_CODE_SHA256=$_vsp_code_sha
VSP_CODE_DIR="$_vsp_code_dir/src"
export VIRTUAL_ENV PATH VSP_CODE_SHA256 VSP_CODE_DIR
"""


def kind_of(uri: str) -> str:
    """``"tarball"`` or ``"wheel"`` from the name's suffix; ``""`` for anything else."""
    path = uri.split("#", 1)[0].lower()
    if path.endswith(TARBALL_SUFFIXES):
        return "tarball"
    return "wheel" if path.endswith(WHEEL_SUFFIX) else ""


@dataclasses.dataclass(frozen=True)
class CodeStage:
    """A pinned package every attempt of a run unpacks and runs from.

    Attributes:
        uri: ``gs://BUCKET/PATH.tar.gz`` (or ``.tgz``, ``.whl``), without a ``#`` fragment.
        sha256: Its sha256, 64 lowercase hex digits.
        cache_dir: Folder on the cluster's shared storage holding one build per digest
            ('' = ``$HOME/.vsp/code``).
    """

    uri: str
    sha256: str
    cache_dir: str = ""

    def __post_init__(self) -> None:
        if not self.uri.startswith("gs://") or "#" in self.uri or "\0" in self.uri:
            raise ValueError(f"code uri must be gs://BUCKET/PATH without '#': {self.uri!r}")
        if not kind_of(self.uri):
            raise ValueError(f"code uri must end in .tar.gz, .tgz or .whl: {self.uri!r}")
        if not SHA256.match(self.sha256):
            raise ValueError(f"sha256 must be 64 lowercase hex digits: {self.sha256!r}")
        if self.cache_dir and (not self.cache_dir.startswith("/") or "\0" in self.cache_dir):
            raise ValueError(f"code cache dir must be an absolute path: {self.cache_dir!r}")

    def shell(self) -> str:
        """The bash that stages the code and enters it (see the module docstring)."""
        cache = shlex.quote(self.cache_dir) if self.cache_dir else f'"{DEFAULT_CACHE}"'
        values = (
            "# Staged code: the pinned package, unpacked once per digest with its own venv.\n"
            f"_vsp_code_uri={shlex.quote(self.uri)}\n"
            f"_vsp_code_sha={self.sha256}\n"
            f"_vsp_code_kind={kind_of(self.uri)}\n"
            f"_vsp_code_file={shlex.quote(self.uri.rsplit('/', 1)[-1])}\n"
            f"_vsp_code_cache={cache}\n"
        )
        return values + _STAGE.replace("{failed}", str(STAGE_FAILED))
