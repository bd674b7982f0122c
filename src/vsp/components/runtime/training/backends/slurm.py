"""The Slurm backend of the training supervisor: attempts are Slurm jobs on a training cluster.

Jobs are submitted through the Slurm Job API (``:callSlurmRestApi``) with the run key in their
name and comment, so they are found again after a step retry. Every attempt of a run gets the
same checkpoint and model directories (``VSP_CHECKPOINT_DIR``, ``VSP_MODEL_DIR``) and so resumes
from the newest valid checkpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence

from vsp.components.runtime.core import errors, gcp_labels, gcs_paths, polling, rest
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.slurm import api, code_stage, error_codes, script
from vsp.components.runtime.trainer import contract, progress
from vsp.components.runtime.training import beacon as beacon_lib
from vsp.components.runtime.training import job_logs, poll_plan, storage_reads
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.recovery import Attempt, Target

log = logging.getLogger(__name__)

# Submissions of one attempt whose answers were lost before the step fails (transient).
SUBMIT_ATTEMPTS = 4
SUBMIT_BACKOFF = polling.Backoff(initial=2.0, maximum=30.0)


@dataclasses.dataclass(frozen=True)
class SlurmTraining:
    """What every attempt of a run submits.

    Attributes:
        command: Trainer argv (never passed through a shell unquoted).
        working_directory: Absolute directory on the cluster's shared storage.
        checkpoint_dir: Checkpoint directory shared by all attempts.
        model_dir: Where the trainer writes the final model.
        environment: Extra environment variables of the trainer.
        nodes: Nodes per attempt.
        tasks_per_node: Tasks per node.
        gpus_per_node: GPUs per node (0 for none).
        time_limit_minutes: Slurm time limit per attempt (None: the partition's).
        account: Slurm account (None: the user's default).
        warning_seconds: Seconds before the time limit at which the trainer gets SIGUSR1.
        standard_output: Job stdout path pattern (``%j`` = job id, ``%x`` = job name, the run
            key); default ``job_logs.FILE_PATTERN`` in the working dir.
        requeue: Let Slurm requeue a preempted job in place (False: the job ends and the
            supervisor resubmits it).
        code: Staged code every attempt unpacks and runs from (None: the working directory as
            it is on the cluster).
        container_image: pyxis image the trainer runs in ('' = on the node itself).
        launcher: ``none``, ``srun`` or ``torchrun`` (``slurm.launcher``).
        nccl_env_file: NCCL settings file each task sources when present ('' = none).
    """

    command: Sequence[str]
    working_directory: str
    checkpoint_dir: str
    model_dir: str
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)
    nodes: int = 1
    tasks_per_node: int = 1
    gpus_per_node: int = 0
    time_limit_minutes: int | None = None
    account: str | None = None
    warning_seconds: int = 60
    standard_output: str | None = None
    requeue: bool = True
    code: code_stage.CodeStage | None = None
    container_image: str = ""
    launcher: str = "none"
    nccl_env_file: str = ""

    def stdout_path(self) -> str:
        return self.standard_output or os.path.join(self.working_directory, job_logs.FILE_PATTERN)

    def digest(self) -> str:
        """A digest of what the run trains and where: command, directories, code and image."""
        identity = [list(self.command), self.working_directory, self.checkpoint_dir, self.model_dir]
        if self.code or self.container_image:  # runs without either keep their old digest
            identity += [self.code.sha256 if self.code else "", self.container_image]
        return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]


def emulated_storage_environment() -> dict[str, str]:
    """``VSP_GCS_FUSE_ROOT`` for the job when this step talks to the Vertex emulator.

    On a cluster Cloud Storage is mounted at ``/gcs``; the emulator keeps its buckets in a
    folder of its state instead (the step's own ``$VSP_GCS_FUSE_ROOT``, set by the local
    runners), and its Slurm, like a real one, gives a job none of the step's environment. So
    with the emulator the step passes that folder on, and a ``gs://`` model or checkpoint dir
    reaches the same files in the job as in the steps. Against Vertex AI: nothing is added.
    """
    root = os.environ.get(gcs_paths.GCS_FUSE_ROOT_ENV, "")
    if rest.emulator_host() and root:
        return {gcs_paths.GCS_FUSE_ROOT_ENV: root}
    return {}


class SlurmBackend(TrainingBackend):
    """Attempts as Slurm jobs.

    Args:
        client: Slurm Job API client of the cluster.
        training: What to run.
        targets: The partitions attempts may use, by name (Spot or not).
        pipeline_run: The pipeline run, recorded in each job's comment so a teardown tells this
            run's jobs from another run's ('' = none).
        beacon_dir: Cloud Storage folder (``gs://BUCKET/PATH``) where each job keeps its
            progress beacon for the step ('' = no beacon: every poll calls Vertex).
        beacon_heartbeat: Longest time between two beacon writes while nothing changes, s.
        cache_seconds: The step's Cloud Storage FUSE cache time, which its counted reads model
            (``storage_reads``).
        progress_env: Environment that makes each job publish its state changes
            (``progress_feed.ProgressFeed.environment``; empty: none).
    """

    resource_type = "SlurmJob"
    time_resolution = 1.0  # Slurm reports whole seconds

    def __init__(
        self,
        client: api.SlurmClient,
        training: SlurmTraining,
        targets: Sequence[Target],
        pipeline_run: str = "",
        beacon_dir: str = "",
        beacon_heartbeat: float = beacon_lib.DEFAULT_HEARTBEAT_SECONDS,
        cache_seconds: float = storage_reads.FUSE_TTL_SECONDS,
        progress_env: dict[str, str] | None = None,
    ):
        self.reads = storage_reads.StorageReads(
            cache_seconds,
            storage_reads.negative_ttl_for(cache_seconds),
            clock=getattr(client, "clock", None),
        )
        self._comment_beacons: dict[str, beacon_lib.Beacon | None] = {}
        self.pipeline_run = pipeline_run
        self.progress_env = dict(progress_env or {})
        self.beacon_dir = beacon_dir
        self.beacon_heartbeat = beacon_heartbeat
        self._logs = job_logs.LogFollower()
        self.client = client
        self.training = training
        self.targets = {t.name: t for t in targets}
        self._first_start: dict[str, float] = {}
        self._run_key = ""  # the jobs' name (``%x`` in their log's path), from find or submit

    def _target(self, partition: str) -> Target:
        return self.targets.get(partition) or Target(partition, spot=False)

    def find(self, run_key: str) -> list[Attempt]:
        """The run's earlier jobs, oldest first.

        Raises:
            errors.UserError: A job carries the run key but was submitted for another command
                or other directories: re-attaching would report its result as this step's.
        """
        self._run_key = run_key
        jobs = self.client.find_jobs(run_key, include_accounting=True)
        mine = self.training.digest()
        for job in jobs:
            if job.spec_digest and job.spec_digest != mine:
                raise errors.UserError(
                    f"run key {run_key!r} already belongs to Slurm job {job.job_id} (working "
                    f"directory {job.working_directory or '?'}, spec {job.spec_digest}), which "
                    f"trains something else than this step (command {list(self.training.command)}"
                    f", working directory {self.training.working_directory}, checkpoints "
                    f"{self.training.checkpoint_dir}, spec {mine}). Fix: give this task its own "
                    "run_key, or leave run_key empty so it is derived from the run and the task."
                )
        return [Attempt(str(j.job_id), self._target(j.partition or "")) for j in reversed(jobs)]

    def description(self, run_key: str, index: int, target: Target) -> script.JobDescription:
        """The submit request of attempt ``index`` on ``target``."""
        self._run_key = run_key
        training = self.training
        environment = {
            **emulated_storage_environment(),
            **training.environment,
            contract.CHECKPOINT_DIR_ENV: training.checkpoint_dir,
            contract.MODEL_DIR_ENV: training.model_dir,
            contract.ATTEMPT_ENV: str(index),
        }
        described = self._description(run_key, target, environment)
        if not self.beacon_dir:
            return described
        beacon_env = beacon_lib.environment(
            self.beacon_dir, self.beacon_heartbeat, comment=described.comment
        )
        beacon_env.update(self.progress_env)
        return dataclasses.replace(described, environment={**environment, **beacon_env})

    def _description(
        self, run_key: str, target: Target, environment: dict[str, str]
    ) -> script.JobDescription:
        training = self.training
        return script.JobDescription(
            run_key=run_key,
            partition=target.name,
            working_directory=training.working_directory,
            command=list(training.command),
            environment=environment,
            nodes=training.nodes,
            tasks_per_node=training.tasks_per_node,
            gpus_per_node=training.gpus_per_node,
            time_limit_minutes=training.time_limit_minutes,
            standard_output=training.stdout_path(),
            account=training.account,
            requeue=training.requeue,
            warning_signal="USR1",
            warning_seconds=training.warning_seconds,
            spec_digest=training.digest(),
            pipeline_run=gcp_labels.run_value(self.pipeline_run),
            code=training.code,
            container_image=training.container_image,
            launcher=training.launcher,
            nccl_env_file=training.nccl_env_file,
        )

    def submit(self, run_key: str, index: int, target: Target) -> Attempt:
        """Submits attempt ``index``; never twice blindly, and racing copies converge.

        A submission whose answer was lost may or may not exist: the job is looked up by run key
        (after a pause, so a late-applied submit shows), and submitted again, with backoff, only
        when it is not found; after ``SUBMIT_ATTEMPTS`` the step fails as transient. Then, as two
        copies of one step may both have submitted, every active job of the run key that was
        not known before is read: the lowest job id wins in every copy, the others are
        cancelled.
        """
        known = {a.job_id for a in self.find(run_key)} if index else set()
        delays = SUBMIT_BACKOFF.delays()
        for submission in range(1, SUBMIT_ATTEMPTS + 1):
            try:
                job_id = str(self.client.submit(self.description(run_key, index, target)))
                break
            except error_codes.SlurmSubmitUnknownError:
                log.warning("submit got no answer: looking for the job before submitting again")
                self.client.clock.sleep(next(delays))
                fresh = [a for a in self.find(run_key) if a.job_id not in known]
                if fresh:
                    job_id, target = fresh[-1].job_id, fresh[-1].target
                    break
                if submission == SUBMIT_ATTEMPTS:
                    raise
                log.warning("no job of run key %s: submitting again", run_key)
        return self._converge(run_key, known, Attempt(job_id, target))

    def _converge(self, run_key: str, known: set[str], attempt: Attempt) -> Attempt:
        """The one active new job of the run key (the lowest id); the others are cancelled.

        This copy's own job may already be gone: the other copy can list both jobs and cancel
        this one before this copy lists. The surviving job is then adopted, never the
        cancelled one; only when no new job is active is this copy's own job returned (its
        outcome is read by the next refresh).
        """
        jobs = [
            j
            for j in self.client.find_jobs(run_key)
            if str(j.job_id) not in known and not j.is_terminal
        ]
        if not jobs:
            return attempt
        winner, *others = sorted(jobs, key=lambda j: int(j.job_id))
        for job in others:
            log.warning(
                "run key %s has jobs %s: keeping %s, cancelling %s (a second copy of this step)",
                run_key,
                ", ".join(str(j.job_id) for j in jobs),
                winner.job_id,
                job.job_id,
            )
            self.client.cancel(int(job.job_id))
        return Attempt(str(winner.job_id), self._target(winner.partition or attempt.target.name))

    def refresh(self, attempt: Attempt) -> None:
        job = self.client.get_job(int(attempt.job_id))
        if job.is_held:
            log.warning("job %s is held (%s): cancelling it", attempt.job_id, job.state_reason)
            self.client.cancel(int(attempt.job_id))
            attempt.outcome = Outcome.USER_FAILURE
            attempt.detail = f"held by Slurm: {job.state_reason} (check prolog scripts)"
            return
        attempt.outcome = job.outcome()
        attempt.requeues = job.restart_cnt or 0
        attempt.begin_time_hold = job.base_state == "PENDING" and job.state_reason == "BeginTime"
        attempt.nodes = job.node_count or self.training.nodes
        if job.start_time and attempt.outcome is not Outcome.PENDING:
            self._first_start.setdefault(attempt.job_id, float(job.start_time))
        attempt.started_at = self._first_start.get(attempt.job_id)
        running_or_ran = attempt.outcome is not Outcome.PENDING and job.start_time
        attempt.run_started_at = float(job.start_time) if running_or_ran else None
        # A requeue makes the job a new submission: its submit time is when the run ended.
        requeued = attempt.requeues and job.submit_time
        attempt.requeued_at = float(job.submit_time) if requeued else None
        attempt.ended_at = (
            float(job.end_time) if attempt.outcome.terminal and job.end_time else None
        )
        attempt.exit_code = job.return_code
        attempt.detail = job.describe()
        if self.beacon_dir:
            self._comment_beacons[attempt.job_id] = beacon_lib.from_comment(
                job.comment, attempt.job_id
            )

    def cancel(self, attempt: Attempt) -> None:
        self.client.cancel(int(attempt.job_id))

    def limit_requests(self, seconds: float) -> None:
        self.client.rest.deadline_at = time.monotonic() + seconds

    def uri(self, attempt: Attempt) -> str:
        return self.client.rest.url(f"{self.client.cluster_ref.path}/slurmJobs/{attempt.job_id}")

    def _log_path(self, attempt: Attempt) -> str:
        return job_logs.file_path(self.training.stdout_path(), attempt.job_id, self._run_key)

    @property
    def writes_beacons(self) -> bool:
        return bool(self.beacon_dir)

    def beacon(self, attempt: Attempt) -> beacon_lib.Beacon | None:
        """The beacon file (a counted, cached read), or the comment's copy once the job keeps
        it there (no read: it came with the last Vertex call)."""
        if self.beacon_channel(attempt) == poll_plan.COMMENT:
            return self._comment_beacons[attempt.job_id]
        return beacon_lib.read(self.beacon_dir, attempt.job_id, self.reads)

    def beacon_channel(self, attempt: Attempt) -> str:
        has_word = self._comment_beacons.get(attempt.job_id) is not None
        return poll_plan.COMMENT if has_word else ""

    def progress(self, attempt: Attempt) -> list[progress.Progress]:
        """Every rank's progress: a listing and a read per record, counted and cached."""
        folder = self.training.checkpoint_dir

        def read() -> tuple[list[progress.Progress], int, bool]:
            found = progress.read_job(folder, attempt.job_id)
            return found, 1 + len(found), True

        return self.reads.fetch(f"{folder}/.progress-{attempt.job_id}", read)

    def api_calls(self) -> int | None:
        sent = getattr(self.client.rest, "requests_sent", None)  # None: a stand-in client
        return sent if isinstance(sent, int) else None

    def storage_calls(self) -> int:
        return self.reads.calls

    def log_tail(self, attempt: Attempt, lines: int = 20) -> str:
        return job_logs.tail(self._log_path(attempt), lines)

    def new_log_lines(self, attempt: Attempt) -> list[str]:
        """New lines of the job's log; on Cloud Storage one counted read per cache time."""
        if attempt.outcome is Outcome.PENDING:
            return []
        path = self._log_path(attempt)
        lines: list[str] = []

        def read() -> tuple[None, int, bool]:
            lines.extend(self._logs.new_lines(path))
            return None, 1, True

        self.reads.fetch(path, read)
        return lines


def targets(spot_partition: str, fallback_partition: str) -> list[Target]:
    """The Spot target and, when given, the fallback target."""
    chosen = [Target(spot_partition, spot=True)]
    if fallback_partition:
        chosen.append(Target(fallback_partition, spot=False))
    return chosen
