"""Each emulated cluster's own filesystem, out of the pipeline steps' sight.

On Vertex AI a pipeline step runs in its own container: it sees Cloud Storage (``/gcs``) but not
the cluster's home (Filestore or Lustre). To give local runs the same split, a cluster's home is
``{state}/slurm/{id}/home`` as its jobs see it, but on the host that path is only an empty mount
point: the files live in ``{state}/slurm/{id}/disk``, and every job process (prolog, batch
script, epilog) starts in a mount namespace of its own where ``disk`` is bind-mounted onto
``home``. A step that opens a path on the cluster's home finds nothing there, as on Vertex; the
jobs see the same paths either way. Emulated Cloud Storage (``{state}/gcs``) is an ordinary
folder that jobs and steps both see. Tests that look inside a cluster go through
``host_path``.

Mount namespaces need ``unshare`` from util-linux and either root or unprivileged user
namespaces. Setting ``slurm_filesystem_isolation``: ``on`` (refuse to start without them),
``off`` (one shared filesystem) or ``auto`` (``on`` when available, else ``off`` with a
warning). No library does this; the wrapper is three shell words with the paths passed as
positional arguments, never pasted into the script.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import pathlib
import shutil
import subprocess
import tempfile

log = logging.getLogger(__name__)

MODES = ("auto", "on", "off")
_MOUNT_SCRIPT = (
    'mount --bind "$1" "$2" && { [ ! -f "$4" ] || mount --bind "$4" /etc/hosts; } && '
    'cd "$3" && unset OLDPWD && shift 4 && exec "$@"'
)
HOSTS_FILENAME = "hosts"


class IsolationUnavailableError(RuntimeError):
    """``slurm_filesystem_isolation`` is ``on`` but mount namespaces cannot be made here."""


@functools.cache
def namespace_prefix() -> tuple[str, ...] | None:
    """The ``unshare`` argv prefix that gives a process a private mount namespace, or None.

    Tried once per process: as root a plain mount namespace, otherwise one inside a user
    namespace (mapped to root, so that ``mount --bind`` is allowed).
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    candidates = [[unshare, "--mount", "--propagation", "private"]]
    candidates.append([unshare, "--user", "--map-root-user", "--mount"])
    if os.geteuid() != 0:
        candidates.reverse()
    with tempfile.TemporaryDirectory(prefix="vsp-fs-probe-") as probe:
        source, target = pathlib.Path(probe, "disk"), pathlib.Path(probe, "home")
        source.mkdir()
        target.mkdir()
        (source / "seen").write_text("1")
        for prefix in candidates:
            argv = [*prefix, "/bin/sh", "-c", _MOUNT_SCRIPT, "probe", str(source), str(target)]
            argv += [str(target), "", "/bin/sh", "-c", 'test -f "$0"', str(target / "seen")]
            try:
                done = subprocess.run(argv, capture_output=True, timeout=20, check=False)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if done.returncode == 0 and not (target / "seen").exists():
                return tuple(prefix)
    return None


def resolve_isolation(mode: str) -> bool:
    """Whether clusters get their own filesystem under the setting ``mode``.

    Raises:
        ValueError: ``mode`` is not one of ``MODES``.
        IsolationUnavailableError: ``mode`` is ``on`` and mount namespaces are unavailable.
    """
    if mode not in MODES:
        raise ValueError(f"slurm_filesystem_isolation must be one of {MODES}, not {mode!r}")
    if mode == "off":
        return False
    available = namespace_prefix() is not None
    if mode == "on" and not available:
        raise IsolationUnavailableError(
            "slurm_filesystem_isolation is 'on' but this machine cannot make mount namespaces. "
            "Fix: install util-linux (unshare) and run as root or enable unprivileged user "
            "namespaces, or set slurm_filesystem_isolation to 'auto' or 'off'."
        )
    if not available:
        log.warning(
            "clusters share the host filesystem (no mount namespaces here): pipeline steps can "
            "see files on the emulated clusters, which they cannot on Vertex AI"
        )
    return available


def cluster_home(state_dir: str | os.PathLike[str], cluster_id: str) -> str:
    """The home of cluster ``cluster_id`` as its jobs see it (``{state}/slurm/{id}/home``)."""
    return os.path.join(os.path.abspath(state_dir), "slurm", cluster_id, "home")


@dataclasses.dataclass(frozen=True)
class ClusterFilesystem:
    """One cluster's home as its jobs see it, and where its files really are.

    Attributes:
        home: The home path jobs see (HOME and the default working directory).
        disk: The folder holding the home's files on the host (= ``home`` when not isolated).
        isolated: Jobs run in their own mount namespace with ``disk`` mounted on ``home``.
    """

    home: str
    disk: str
    isolated: bool

    @classmethod
    def for_cluster(cls, directory: pathlib.Path, isolated: bool) -> ClusterFilesystem:
        """The filesystem of the cluster whose emulator folder is ``directory``."""
        home = cluster_home(directory.parent.parent, directory.name)
        return cls(home, str(directory / "disk") if isolated else home, isolated)

    def prepare(self, nodes: tuple[str, ...] = ()) -> None:
        """Creates the mount point and the backing folder; with isolation, also the cluster's
        ``/etc/hosts`` (the machine's, plus every node name as 127.0.0.1), mounted over
        ``/etc/hosts`` in every job, so node names resolve as on a cluster."""
        os.makedirs(self.home, exist_ok=True)
        os.makedirs(self.disk, exist_ok=True)
        if self.isolated and nodes:
            try:
                machine = pathlib.Path("/etc/hosts").read_text(encoding="utf-8")
            except OSError:
                machine = "127.0.0.1 localhost\n"
            lines = [
                machine.rstrip("\n"),
                "# emulated Slurm nodes",
                *(f"127.0.0.1 {n}" for n in nodes),
            ]
            path = pathlib.Path(self.disk).parent / HOSTS_FILENAME
            text = "\n".join(lines) + "\n"
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                tmp = path.with_suffix(".tmp")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, path)

    def host_path(self, path: str) -> str:
        """Where a path as the cluster's jobs see it is on the host."""
        if not self.isolated:
            return path
        relative = os.path.relpath(path, self.home)
        if relative == "." or not relative.startswith(".."):
            return os.path.normpath(os.path.join(self.disk, relative))
        return path

    def wrap(self, argv: list[str], cwd: str) -> list[str]:
        """``argv`` run in a mount namespace with the home mounted, starting in ``cwd``."""
        if not self.isolated:
            return argv
        prefix = namespace_prefix()
        if prefix is None:
            raise OSError("mount namespaces are no longer available (unshare failed)")
        hosts = os.path.join(os.path.dirname(self.disk), HOSTS_FILENAME)
        mount = ["/bin/sh", "-c", _MOUNT_SCRIPT, "vsp-cluster-fs", self.disk, self.home, cwd, hosts]
        return [*prefix, *mount, *argv]
