"""``app.slurm``: the emulated Slurm of every cluster, its tick and its Python API.

State lives in the store (``slurm_clusters``: per-cluster nodes, accounting, preemption plan and
job ids; ``slurm_jobs``: job records), processes in an in-memory ``ProcessTable``. Processes
cannot outlive the emulator: a restarted emulator finds jobs recorded as running without a
process and treats them as a node failure (requeue if requeue-able, else NODE_FAIL), after
killing any leftover process group that provably runs the job's script. ``shutdown()`` (also
run at interpreter exit) SIGKILLs every job process group this emulator started.

Python API (``server.app.slurm``): ``set_preemption_plan``, ``clear_preemption_plan``,
``preemption_plan``, ``preempt_now``, ``requeue_now``, ``preemptions``, ``host_path``, ``jobs``,
``nodes``, ``shutdown``.
Clusters are named by id (``"c1"``) or full resource name.
"""

from __future__ import annotations

import atexit
import shutil
import weakref
from typing import Any

from vsp.vertex_emulator import errors
from vsp.vertex_emulator.clusters import api as clusters
from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import filesystem as cluster_filesystem
from vsp.vertex_emulator.slurm import lifecycle as slurm_lifecycle
from vsp.vertex_emulator.slurm import pending_plans, real_preemption
from vsp.vertex_emulator.slurm import preemption as slurm_preemption
from vsp.vertex_emulator.slurm import process as slurm_process
from vsp.vertex_emulator.slurm import real as real_slurm
from vsp.vertex_emulator.slurm import sim as slurm_sim
from vsp.vertex_emulator.slurm import topology as slurm_topology


def _shutdown_at_exit(ref: weakref.ReferenceType[SlurmRuntime]) -> None:
    runtime = ref()
    if runtime is not None:
        runtime.shutdown()


class SlurmRuntime:
    """The emulated Slurm of one emulator app."""

    def __init__(self, app: Any):
        """Binds to an app (its store, settings and state directory).

        Args:
            app: The ``EmulatorApp``.
        """
        self.app = app
        self.procs = slurm_process.ProcessTable()
        self.isolated_filesystems = cluster_filesystem.resolve_isolation(
            app.settings.slurm_filesystem_isolation
        )
        self._real: tuple[str, str, real_preemption.RealPreemptor] | None = None
        atexit.register(_shutdown_at_exit, weakref.ref(self))

    @property
    def real(self) -> real_preemption.RealPreemptor | None:
        """The real Slurm's injector (``.slurmrestd``: its API) with the ``slurmrestd`` setting."""
        settings = self.app.settings
        if not settings.slurmrestd:
            return None
        key = (settings.slurmrestd, settings.slurmrestd_preemption)
        if self._real is None or self._real[:2] != key:
            rest = real_slurm.RealSlurmrestd(settings.slurmrestd)
            self._real = (*key, real_preemption.RealPreemptor(rest, key[1]))
        return self._real[2]

    # --- loading and the tick ---------------------------------------------------------------

    def context(self, cluster: dict[str, Any], now: float | None = None) -> Any:
        """Loads a cluster's Slurm state (a fresh one for a new or re-created cluster)."""
        store = self.app.store
        name = cluster["name"]
        state = store.get(slurm_context.STATE_COLLECTION, name)
        if state is not None and state.get("generation") != cluster.get("createTime", ""):
            self._forget(name)
            state = None
        persisted = state is not None
        if state is None:
            state = slurm_context.new_state(cluster)
            plan = pending_plans.take(store, name)  # armed before the cluster existed
            if plan is not None:
                state["plan"] = plan
        jobs = {
            int(doc["job_id"]): doc
            for _, doc in store.select(
                slurm_context.JOB_COLLECTION, lambda d: d.get("cluster") == name
            )
        }
        return slurm_context.ClusterContext(
            app=self.app,
            cluster=cluster,
            topo=slurm_topology.from_cluster(cluster),
            state=state,
            jobs=jobs,
            now=self.app.now() if now is None else now,
            procs=self.procs,
            persisted=persisted,
            isolated=self.isolated_filesystems,
        )

    def tick(self, app: Any, now: float) -> None:
        """Advances every cluster that uses Slurm; cleans up after deleted clusters."""
        self.procs.reap()
        if self.real is not None:
            self.real.tick(app, now)
        store = app.store
        # Only the clusters with Slurm state are read, so a tick costs nothing per idle cluster.
        for name in store.keys(slurm_context.STATE_COLLECTION):
            record = store.get(clusters.COLLECTION, name)
            if record is None:
                self._forget(name)
                continue
            cluster = record["cluster"]
            ctx = self.context(cluster, now)
            if cluster["clusterStatus"]["state"] == "STOPPING":
                slurm_sim.shut_down_cluster(ctx)
            else:
                slurm_sim.step(ctx, scheduler_pass=app.periodic_tick)
            ctx.save()

    def _forget(self, name: str) -> None:
        """Kills the processes of a cluster's jobs and drops its Slurm state and its home.

        A deleted cluster's home goes with it, so a re-created cluster starts with an empty
        home: with its own filesystem (``cluster_filesystem``), the folder backing the home
        is removed.
        """
        store = self.app.store
        for key in self.procs.keys():
            if key[0] == name:
                self.procs.discard(key)
        for key, doc in store.select(
            slurm_context.JOB_COLLECTION, lambda d: d.get("cluster") == name
        ):
            if doc.get("phase") and self.procs.get((name, int(doc["job_id"]))) is None:
                slurm_process.kill_stale_group(doc.get("pgid"), doc.get("marker"))
            store.delete(slurm_context.JOB_COLLECTION, key)
        store.delete(slurm_context.STATE_COLLECTION, name)
        if self.isolated_filesystems:
            directory = slurm_context.cluster_dir(self.app.state_dir, name.rsplit("/", 1)[-1])
            shutil.rmtree(directory / "disk", ignore_errors=True)

    def shutdown(self) -> int:
        """SIGKILLs every job process group this emulator started; returns how many ran."""
        return self.procs.shutdown()

    # --- Python API ---------------------------------------------------------------------------

    def resolve(self, cluster: str) -> dict[str, Any]:
        """The public JSON of a cluster named by id or full name.

        Raises:
            errors.ApiException: NOT_FOUND when no (single) cluster matches.
        """
        matches = self._matches(cluster)
        if len(matches) != 1:
            raise errors.not_found(f'ModelDevelopmentCluster "{cluster}" not found.')
        return matches[0]

    def _matches(self, cluster: str) -> list[dict[str, Any]]:
        store = self.app.store
        if "/" in cluster:
            record = store.get(clusters.COLLECTION, cluster)
            return [record["cluster"]] if record else []
        suffix = f"/modelDevelopmentClusters/{cluster}"
        return [r["cluster"] for k, r in store.items(clusters.COLLECTION) if k.endswith(suffix)]

    def _edit(self, cluster: str, change: Any) -> Any:
        with self.app.store.transaction():
            ctx = self.context(self.resolve(cluster))
            result = change(ctx)
            ctx.save()
            return result

    def set_preemption_plan(self, cluster: str, **plan: Any) -> dict[str, Any]:
        """Sets a cluster's spot preemption plan (see ``slurm_preemption.normalize_plan``).

        Example: ``set_preemption_plan("c1", mode="fixed", after_seconds=2, max_count=3)``
        preempts the running job 3 times, each time 2 s after it started running. For a
        cluster that does not exist yet the plan waits and applies once it is created
        (``pending_plans``).

        Returns:
            The plan as shown by ``preemption_plan`` (``source`` ``pending`` when it waits).

        Raises:
            ValueError: An invalid plan.
        """
        normalized = slurm_preemption.normalize_plan(plan)
        if not self._matches(cluster):
            return pending_plans.arm(self.app.store, cluster, normalized)

        def change(ctx: Any) -> dict[str, Any]:
            ctx.state.update(plan=normalized, plan_fired=0, plan_runs=0)
            return slurm_preemption.describe(ctx)

        return self._edit(cluster, change)

    def clear_preemption_plan(self, cluster: str) -> bool:
        """Removes a cluster's own plan (the settings' plan, if any, applies again), or the
        plan waiting for a cluster that does not exist yet."""
        if not self._matches(cluster):
            return pending_plans.clear(self.app.store, cluster)

        def change(ctx: Any) -> bool:
            had = ctx.state.get("plan") is not None
            ctx.state.update(plan=None, plan_fired=0, plan_runs=0)
            return had

        return self._edit(cluster, change)

    def preemption_plan(self, cluster: str) -> dict[str, Any] | None:
        """The effective plan with ``source``, ``fired``, ``runs`` (and ``preview``); for a
        cluster not created yet, the plan waiting for it.

        Raises:
            errors.ApiException: NOT_FOUND: no such cluster and no plan waits for it.
        """
        if not self._matches(cluster):
            waiting = pending_plans.get(self.app.store, cluster)
            if waiting is None:
                self.resolve(cluster)  # raises NOT_FOUND
            return pending_plans.describe(waiting)
        return self._edit(cluster, slurm_preemption.describe)

    def preempt_now(self, cluster: str, job_id: int) -> dict[str, Any]:
        """Preempts a running job's SPOT nodes at once; returns the timeline entry.

        Raises:
            errors.ApiException: NOT_FOUND (cluster or job), FAILED_PRECONDITION (not running).
        """

        if self.real is not None:
            return self._preempt_real(cluster, int(job_id))

        def change(ctx: Any) -> dict[str, Any]:
            job = ctx.jobs.get(int(job_id))
            if job is None:
                raise errors.not_found(f"No Slurm job {job_id} on {ctx.name}.")
            if job.get("phase") not in ("prolog", "script") or job.get("kill") is not None:
                raise errors.failed_precondition(f"Slurm job {job_id} is not running.")
            slurm_preemption.preempt(ctx, job, source="manual")
            return dict(ctx.events[-1])

        return self._edit(cluster, change)

    def requeue_now(self, cluster: str, job_id: int) -> dict[str, Any]:
        """Requeues a running job as ``scontrol requeue`` does; returns the timeline entry.

        Raises:
            errors.ApiException: NOT_FOUND (cluster or job), FAILED_PRECONDITION (not running),
                FAILED_PRECONDITION with a real Slurm (which ``scontrol`` requeues).
        """
        if self.real is not None:
            raise errors.failed_precondition("A real Slurm's jobs are requeued by scontrol.")

        def change(ctx: Any) -> dict[str, Any]:
            job = ctx.jobs.get(int(job_id))
            if job is None:
                raise errors.not_found(f"No Slurm job {job_id} on {ctx.name}.")
            if job.get("phase") not in ("prolog", "script") or job.get("kill") is not None:
                raise errors.failed_precondition(f"Slurm job {job_id} is not running.")
            slurm_lifecycle.requeue(ctx, job)
            return dict(ctx.events[-1])

        return self._edit(cluster, change)

    def _preempt_real(self, cluster: str, job_id: int) -> dict[str, Any]:
        self.resolve(cluster)
        injector = self.real
        assert injector is not None
        found = injector.slurmrestd.get_json(f"/slurm/v0.0.42/job/{job_id}").get("jobs") or []
        if not found:
            raise errors.not_found(f"No Slurm job {job_id} on the real Slurm.")
        if "RUNNING" not in (found[0].get("job_state") or []):
            raise errors.failed_precondition(f"Slurm job {job_id} is not running.")
        return injector.preempt(self.app, found[0], self.app.now())

    def preemptions(self, cluster: str | None = None) -> list[dict[str, Any]]:
        """The preemption timeline (spot, partition_prio, node_failure; on a real Slurm:
        partition_prio or requeue), oldest first."""
        cluster_id = None
        if cluster is not None:
            cluster_id = cluster.rsplit("/", 1)[-1]
        events = slurm_context.read_events(self.app.state_dir, cluster_id)
        if self.real is not None and cluster_id is not None:  # shared by every cluster
            events += slurm_context.read_events(self.app.state_dir, real_preemption.TIMELINE_DIR)
        return events

    def host_path(self, cluster: str, path: str) -> str:
        """Where ``path``, as the cluster's jobs see it, is on this host.

        A cluster's home is visible to its jobs only (``cluster_filesystem``); tests that look
        inside a cluster go through this, as nothing else on the host can.
        """
        return self._edit(cluster, lambda ctx: ctx.filesystem.host_path(path))

    def cancel_unfinished(self) -> list[tuple[str, int]]:
        """Cancels every job not yet ended, on every cluster (a run-local emulator's start:
        the run that submitted them is gone); returns (cluster name, job id) of each."""
        cancelled = []
        for name in self.app.store.keys(slurm_context.STATE_COLLECTION):
            if self.app.store.get(clusters.COLLECTION, name) is None:
                continue

            def change(ctx: Any) -> list[int]:
                return [i for i in sorted(ctx.jobs) if slurm_lifecycle.cancel(ctx, ctx.jobs[i])]

            cancelled += [(name, job_id) for job_id in self._edit(name, change)]
        return cancelled

    def jobs(self, cluster: str) -> list[dict[str, Any]]:
        """The stored job records of a cluster (internal form), by job id."""
        return self._edit(cluster, lambda ctx: [ctx.jobs[k] for k in sorted(ctx.jobs)])

    def nodes(self, cluster: str) -> dict[str, dict[str, str]]:
        """Node name -> ``{"state", "reason"}`` (IDLE, ALLOCATED, DOWN or DRAIN)."""

        def read(ctx: Any) -> dict[str, dict[str, str]]:
            return {
                node: dict(zip(("state", "reason"), ctx.node_state(node), strict=True))
                for node in ctx.topo.nodes
            }

        return self._edit(cluster, read)
