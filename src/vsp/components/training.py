"""KFP components: Spot training on a training cluster, and the Slurm account it needs.

Declarations (``vsp.components.declare``): each body hands its parameters to
``vsp.components.runtime.steps.<component>.main``.
"""

from typing import NamedTuple

from kfp import dsl

from vsp.components.declare import component


@component
def train_on_cluster(
    project: str,
    location: str,
    command: list,
    working_directory: str,
    model_dir: str,
    gcp_resources: dsl.OutputPath(str),
    metrics: dsl.Output[dsl.Metrics],
    report: dsl.Output[dsl.HTML],
    cluster_name: str = "",
    cluster_id: str = "",
    checkpoint_dir: str = "",
    spot_partition: str = "spot",
    fallback_partition: str = "",
    environment: dict = {},  # noqa: B006 - KFP reads the default; it is never mutated
    nodes: int = 1,
    tasks_per_node: int = 1,
    gpus_per_node: int = 0,
    time_limit_minutes: int = 0,
    account: str = "",
    log_directory: str = "",
    max_preemptions: int = 10,
    max_user_failures: int = 0,
    fallback_after_preemptions: int = 0,
    capacity_wait_seconds: float = 0.0,
    warning_seconds: int = 60,
    spot_price_per_node_hour: float = 0.0,
    ondemand_price_per_node_hour: float = 0.0,
    timeout_seconds: float = 604800.0,
    poll_seconds: float = 20.0,
    run_key: str = "",
    pipeline_run: str = "",
    task_id: str = "",
    code_uri: str = "",
    code_sha256: str = "",
    code_cache_dir: str = "",
    container_image: str = "",
    options: dict = {},  # noqa: B006
    max_hangs: int = 1,
    hang_floor_seconds: float = 1800.0,
    hang_step_factor: float = 20.0,
    keep_job_on_timeout: bool = False,
    launcher: str = "none",
    nccl_env_file: str = "/usr/local/gib/scripts/set_nccl_env.sh",
    progress_topic: str = "",
) -> NamedTuple(
    "Outputs",
    [
        ("job_ids", list),
        ("checkpoint_dir", str),
        ("model_dir", str),
        ("preemptions", int),
        ("code_sha256", str),
    ],
):
    """Trains on the cluster's Spot partition through the Slurm Job API, resuming after preemption.

    Every attempt is a Slurm job (requeue on, SIGUSR1 before the time limit, SIGTERM forwarded to
    the trainer) that gets the same checkpoint directory through ``VSP_CHECKPOINT_DIR``; a
    requeued or preempted job resumes from the newest valid checkpoint. Job ids are written to
    ``gcp_resources`` before polling, and jobs carry a run key, so a retried step re-attaches
    instead of submitting again. Cancelling the pipeline cancels the Slurm job.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region of the cluster.
        command: Trainer argv, e.g. ``["python", "train.py", "--epochs", "3"]`` (each item is
            passed as one argument; nothing is interpreted by a shell).
        working_directory: Absolute directory of the job on the cluster's shared storage;
            ``{run}`` in it becomes the pipeline run's id (a folder per run).
        model_dir: Where the trainer writes the final model (``VSP_MODEL_DIR``), on Cloud
            Storage as the cluster sees it (``/gcs/BUCKET/PATH`` or ``gs://BUCKET/PATH``).
            ``{run}`` in it becomes the pipeline run's id, a folder per run (a schedule's runs
            all get the same value); the ``model_dir`` output is the path used.
        gcp_resources: Output: the Slurm jobs of the run (proto-JSON).
        metrics: Output: preemptions, resubmissions, wall time (s), node-hours, work lost (s),
            goodput (0-1), cost and estimated Spot saving (USD).
        report: Output: HTML report with the timeline of attempts and preemptions.
        cluster_name: The cluster's full name, ``projects/P/locations/L/
            modelDevelopmentClusters/ID``: pass create_cluster's ``cluster_name`` output, so
            this task runs once the cluster exists (no ``.after()`` needed). '' = cluster_id.
        cluster_id: Id of the training cluster (1-10 lowercase letters and digits); '' = the
            id in cluster_name. When both are given they must agree.
        checkpoint_dir: Checkpoint directory shared by all attempts (``VSP_CHECKPOINT_DIR``).
            '' = on Cloud Storage under the run's output folder (the folder holding
            ``model_dir``): ``checkpoints/RUN_KEY`` there, which this step can read to measure
            work lost and goodput. A directory on the cluster's own disks works for resuming,
            but then those two metrics are reported as unknown. ``{run}`` in it becomes the
            pipeline run's id; without it, every run of a schedule resumes from the checkpoint
            the run before left (a chain, as a fine-tuning task continues its pretraining).
        spot_partition: Slurm partition of Spot nodes.
        fallback_partition: Partition of on-demand/reserved nodes to fall back to ('' = none).
        environment: Extra environment variables of the trainer.
        nodes: Nodes per job.
        tasks_per_node: Tasks per node.
        gpus_per_node: GPUs per node (0 = none requested).
        time_limit_minutes: Slurm time limit per job, minutes (0 = partition default).
        account: Slurm account to charge ('' = the user's default account).
        log_directory: Folder of the jobs' stdout (``slurm-JOBID-RUNKEY.out``: the run key
            keeps apart the runs of clusters that number their jobs alike), as the cluster sees
            it ('' = the working directory); ``{run}`` in it becomes the pipeline run's id. On
            Cloud Storage (``/gcs/BUCKET/PATH``, or ``gs://BUCKET/PATH``, given to Slurm as
            that FUSE path) the step, which cannot see the cluster's disks, shows the trainer's
            new log lines while it polls and the tail on failure.
        max_preemptions: Preemptions survived before the step fails.
        max_user_failures: Restarts after the trainer itself failed (non-zero exit).
        fallback_after_preemptions: Move to the fallback partition after this many preemptions
            (0 = never).
        capacity_wait_seconds: Longest wait for Spot nodes before falling back (or failing
            without a fallback), seconds; 0 = no limit.
        warning_seconds: Seconds before the time limit at which the trainer gets SIGUSR1.
        spot_price_per_node_hour: Spot price per node-hour, USD/hour, for the cost metrics.
        ondemand_price_per_node_hour: On-demand price per node-hour, USD/hour, for the saving
            estimate.
        timeout_seconds: Longest time the whole run may take, seconds; then the running job is
            cancelled (unless keep_job_on_timeout) and the step fails.
        poll_seconds: Interval of Vertex polls of the job's state, seconds, when the job's
            progress beacon is not visible; with the beacon (checkpoints on Cloud Storage) the
            step reads it every 5 x poll_seconds (at least the mount's cache time apart) and
            calls Vertex on its changes and at least every 60 x poll_seconds, so a job's end
            is seen up to 5 x poll_seconds late (docs/components.md, the poll plan).
        run_key: Identity of the run's jobs ('' = derived from the pipeline run).
        pipeline_run: The pipeline run's unique id (pass ``dsl.PIPELINE_JOB_ID_PLACEHOLDER``);
            '' = a fresh identity, so the call never re-attaches to an earlier one.
        task_id: This task's unique id (pass ``dsl.PIPELINE_TASK_ID_PLACEHOLDER``); part of
            the derived run key, so two training tasks of one run, and the iterations of a
            ``dsl.ParallelFor``, never share jobs or checkpoints, while a retry of the task
            re-attaches.
        code_uri: The trainer's code as a package on Cloud Storage: ``gs://BUCKET/PATH.tar.gz``
            (a source tarball; its top-level ``requirements.txt`` lists its dependencies) or
            ``gs://BUCKET/PATH.whl`` (a wheel, installed with its dependencies). Each job
            unpacks it once per digest on the cluster's shared storage, builds a virtual
            environment for it once, and runs ``command`` in the unpacked folder with that
            environment first on ``PATH``. '' = run ``command`` in working_directory as it is.
            ``vsp submit --code DIR`` packs, uploads and pins a folder.
        code_sha256: The package's sha256 (64 hex digits, ``sha256sum FILE``); required with
            code_uri unless code_uri ends in ``#sha256=HEX``. Checked before anything is
            submitted, and again by each job before it unpacks the package.
        code_cache_dir: Absolute folder on the cluster's shared storage holding one unpacked
            package and venv per digest ('' = ``$HOME/.vsp/code``).
        container_image: Run the trainer as ``srun --container-image=IMAGE`` (pyxis and enroot
            on the nodes; the cluster must carry the label ``slurm-pyxis: yes``, else the step
            refuses before submitting). '' = on the node itself. Not with code_uri.
        options: More of this component's parameters by name, for example
            ``{"max_preemptions": 20}``; a value here wins over the parameter of that name,
            and a name the component does not have is refused. It lets a pipeline offer
            rarely set parameters as one field.
        max_hangs: Hung jobs cancelled and resubmitted before the step fails; a hang has its
            own budget, neither a preemption nor a trainer failure.
        hang_floor_seconds: Least time without a finished training step before a running job
            counts as hung, seconds; the bound is the larger of this and hang_step_factor times
            the trainer's step time. 0 = no hang detection. Needs the trainer's step hook
            (``progress.step``) and checkpoints on Cloud Storage.
        hang_step_factor: Multiple of the trainer's observed time per step (seconds per
            step, smoothed or between two progress reads) that counts as hung, when larger than
            hang_floor_seconds.
        keep_job_on_timeout: At timeout_seconds, leave the running Slurm job as it is (True)
            instead of cancelling it (False).
        launcher: How each job starts the trainer: ``none`` (once, on the first node; the
            other nodes idle), ``srun`` (tasks_per_node tasks on every node, each with
            ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``NODE_RANK``, ``MASTER_ADDR`` and
            ``MASTER_PORT``) or ``torchrun`` (one torchrun per node, tasks_per_node workers,
            c10d rendezvous at the first node of each start). See docs/multi-node.md.
        nccl_env_file: Absolute path of the machine's NCCL settings file, sourced by every
            task when it exists on its node (srun and torchrun only; '' = none).
        progress_topic: Pub/Sub topic ``projects/P/topics/T`` (it must exist) where each job
            publishes its state changes (start, preemption notice, end) for this step, which
            waits on them between polls and so sees a change within 25 s (most within a
            second) instead of within a poll interval (up to about 100 s), and calls Vertex
            less. Needs checkpoint_dir on Cloud Storage
            (the poll plan it speeds up reads the beacon beside it). The step creates and
            deletes a subscription of its own; the nodes need curl and permission to publish,
            the step's service account permission to subscribe. '' = none: polls only.

    Returns:
        job_ids: Slurm job ids of every attempt, oldest first.
        checkpoint_dir: The checkpoint directory (the default's resolved path when '' was given).
        model_dir: The model directory.
        preemptions: Preemptions survived.
        code_sha256: The sha256 of the staged code ('' without code_uri).
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import train_on_cluster

    return train_on_cluster.main(**params)


@component
def ensure_slurm_account(
    project: str,
    location: str,
    account: str,
    partitions: list,
    cluster_name: str = "",
    cluster_id: str = "",
    user: str = "",
    organization: str = "",
) -> str:
    """Makes sure a Slurm account, user and association exist (idempotent).

    Needed when the cluster enforces associations (``AccountingStorageEnforce`` with
    ``associations``): Slurm then rejects jobs of users without one. This is the REST form of
    ``sacctmgr add User Accounts=ACCOUNT Partition=P USER``.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region of the cluster.
        account: Slurm account name.
        partitions: Partitions the association covers (empty list = all partitions).
        cluster_name: The cluster's full name: pass create_cluster's ``cluster_name`` output,
            so this task runs once the cluster exists (no ``.after()`` needed). '' =
            cluster_id.
        cluster_id: Id of the training cluster; '' = the id in cluster_name. When both are
            given they must agree.
        user: Linux user of the association ('' = the caller's own account on the cluster).
        organization: Organization recorded with a new account.

    Returns:
        The user the association was ensured for.
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import ensure_slurm_account

    return ensure_slurm_account.main(**params)
