"""Fault plans: a hypothesis strategy, and running one plan in a ``World`` with its invariants.

A plan names an entry point, one of its calls and a fault kind: an HTTP status (429, 503)
before or after the server applied the call, a connection reset before or after, a timeout
(the server holds the call longer than the client waits), an LRO error, an emulator restart
during the call, or a kill of the step during the call followed by a re-run (which must
re-attach). Every outcome must be a success or an ``errors.VspError`` whose exit code is in the
taxonomy, within the deadline, and a plan whose fault is transient (every kind but
``lro_error``) must end in success: one or two lost, refused or held requests are the runtime's
to absorb. ``foreign`` puts a job of another run on the plan's own cluster (entries that tear a
cluster down). Then, once every held request has landed (``World.settle``), the entry's
invariants are checked, and so is the order of the plan's requests: a create, upload or submit
is sent again only after a look-up (``no_blind_resend``).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from hypothesis import strategies as st

from tests.campaign import campaign_checks as cc
from tests.campaign import campaign_entries as ce
from tests.campaign import campaign_world as cw
from vsp.components.runtime.core import errors

KINDS = (
    "429_before",
    "503_before",
    "503_after",
    "reset_before",
    "reset_after",
    "timeout",
    "lro_error",
    "restart",
    "kill_rerun",
)
EXIT_CODES = {
    errors.EXIT_USER_ERROR,
    errors.EXIT_INTERNAL_ERROR,
    errors.EXIT_TRANSIENT_ERROR,
    errors.EXIT_CANCELLED,
}
DEADLINE = 30.0  # seconds a call may take (its own timeouts are shorter), plus SLACK
SLACK = 10.0


@dataclasses.dataclass(frozen=True)
class Plan:
    """One fault plan; ``replay`` code is ``Plan(**dict)``."""

    entry: str
    kind: str
    call: str
    skip: int = 0
    times: int = 1
    code: int = 14
    reuse: bool = False
    state: str = "FAILED"
    keep_minutes: float = 30.0
    at: float = 0.05
    foreign: bool = False


@st.composite
def plans(draw: Any, entries: tuple[str, ...] = tuple(ce.ENTRIES)) -> Plan:
    """A random fault plan over ``entries``."""
    entry = ce.ENTRIES[draw(st.sampled_from(entries))]
    kinds = [k for k in KINDS if entry.restartable or k != "restart"]
    if not entry.lro_calls:
        kinds.remove("lro_error")
    kind = draw(st.sampled_from(kinds))
    calls = sorted(set(entry.calls(cc.Ctx("x", "x", "x", "x"))) - set(entry.unused))
    call = draw(st.sampled_from(entry.lro_calls if kind == "lro_error" else calls))
    return Plan(
        entry=entry.name,
        kind=kind,
        call=call,
        skip=draw(st.integers(0, 1)),
        times=draw(st.integers(1, 2)),
        code=draw(st.sampled_from([1, 2, 3, 8, 13, 14])),
        reuse=draw(st.booleans()),
        state=draw(st.sampled_from(["FAILED", "CANCELLED"])),
        keep_minutes=draw(st.sampled_from([0.0, 30.0])),
        at=draw(st.sampled_from([0.0, 0.05, 0.15, 0.3])),
        foreign=entry.foreign_jobs and draw(st.booleans()),
    )


@dataclasses.dataclass
class PlanResult:
    """What one plan did and found."""

    plan: Plan
    outcome: str = ""
    fired: int = 0
    checked: int = 0
    violations: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def _rule(plan: Plan, target: tuple[str, str, str | None]) -> dict[str, Any]:
    method, path, body = target
    rule: dict[str, Any] = {"method": method, "path": path, "body": body}
    rule.update(skip=plan.skip, times=plan.times)
    kind = plan.kind
    if kind in ("429_before", "503_before", "503_after"):
        status, when = kind.split("_")
        rule.update(action="status", http_status=int(status), when=when)
    elif kind in ("reset_before", "reset_after"):
        rule.update(action=kind)
    elif kind == "timeout":
        rule.update(action="delay", seconds=cw.CLIENT_TIMEOUT + 0.3)
    elif kind == "lro_error":
        rule.update(action="lro_error", code=plan.code)
    elif kind == "kill_rerun":
        rule.update(action="delay", seconds=0.3, when="after" if plan.skip else "before", times=1)
    return rule


def call_in_thread(func: Any, token: cw.KillToken | None, limit: float) -> tuple[str, Any, float]:
    """Runs ``func`` in a thread carrying ``token``; ``(outcome, value or exception, seconds)``.

    ``outcome`` is ``ok``, ``error``, ``killed`` or ``hang`` (still running after ``limit``).
    """
    box: dict[str, Any] = {}

    def body() -> None:
        cw.carry(token)
        try:
            box["value"] = func()
            box["outcome"] = "ok"
        except cw.Killed as exc:
            box["value"], box["outcome"] = exc, "killed"
        except BaseException as exc:  # noqa: BLE001 - every outcome is judged by the caller
            box["value"], box["outcome"] = exc, "error"

    start = time.monotonic()
    thread = threading.Thread(target=body, daemon=True, name="campaign-step")
    thread.start()
    thread.join(limit)
    seconds = time.monotonic() - start
    if thread.is_alive():
        if token is not None:
            token.killed = True
        return "hang", None, seconds
    return box["outcome"], box["value"], seconds


def _taxonomy(result: PlanResult, outcome: str, value: Any) -> None:
    result.checked += 1
    if outcome == "hang":
        result.violations.append(f"no_hang: still running after {DEADLINE + SLACK:g} s")
    elif outcome == "error":
        code = getattr(value, "exit_code", None)
        if not isinstance(value, errors.VspError):
            result.violations.append(f"taxonomy: raw {type(value).__name__}: {value}")
        elif code not in EXIT_CODES:
            result.violations.append(f"exit_code: {type(value).__name__} exits {code}: {value}")


def run_plan(world: cw.World, plan: Plan) -> PlanResult:
    """Runs one plan in ``world`` and checks the invariants (faults cleared afterwards)."""
    entry = ce.ENTRIES[plan.entry]
    ctx = cc.Ctx(
        foreign=plan.foreign,
        resources=str(world.state_dir.parent / f"{world.next_id('res-')}.json"),
        cluster_id=world.next_id("k"),
        run_label=world.next_id("run-"),
        model_id=world.next_id("m") if not plan.reuse else "shared",
        run_key=world.next_id("key-"),
        state=plan.state,
        keep_minutes=plan.keep_minutes,
        reuse=plan.reuse,
    )
    result = PlanResult(plan)
    started = time.monotonic()
    world.server.clear_faults()
    entry.prepare(world, ctx)
    mark = len(world.seen)
    target = entry.calls(ctx)[plan.call]
    token = cw.KillToken()
    timer = None
    if plan.kind == "restart":
        timer = threading.Timer(plan.at, world.restart)
        timer.start()
    elif plan.kind == "kill_rerun":
        world.server.add_fault(**_rule(plan, target))
        timer = threading.Timer(plan.at + 0.1, lambda: setattr(token, "killed", True))
        timer.start()
    else:
        world.server.add_fault(**_rule(plan, target))
    outcome, value, _ = call_in_thread(lambda: entry.run(world, ctx), token, DEADLINE + SLACK)
    if timer is not None:
        timer.join()
    fired = sum(rule.fired for rule in world.server.faults())
    result.fired = 1 if plan.kind == "restart" else fired
    world.server.clear_faults()
    _taxonomy(result, outcome, value)
    if plan.kind == "kill_rerun":
        result.fired = int(outcome == "killed")
        if outcome == "killed":
            time.sleep(0.35)  # the held request lands, as after a real kill
            for name, ok, detail in entry.after_kill(world, ctx, world.requests_since(mark)):
                result.checked += 1
                if not ok:
                    result.violations.append(f"{name}: {detail}")
        outcome, value, _ = call_in_thread(lambda: entry.run(world, ctx), None, DEADLINE + SLACK)
        result.checked += 1
        if outcome != "ok":
            result.violations.append(f"rerun_reattaches: the re-run ended {outcome}: {value!r}")
        _taxonomy(result, outcome, value)
    result.outcome = outcome if outcome != "error" else type(value).__name__
    ctx.result = value
    # An emulator restart longer than the client's retry deadline is an outage the call may
    # report (as a transient error); a shorter one must be absorbed like any transient fault.
    outage = plan.kind == "restart" and world.down_seconds > cw.RETRY.deadline / 2
    if plan.kind != "lro_error" and not outage and outcome not in ("ok", "hang"):
        result.violations.append(
            f"absorbs_transient_faults: {plan.kind} x{plan.times} ended {outcome}: "
            f"{type(value).__name__}: {value}"
        )
    result.checked += 1
    if not world.settle():
        result.violations.append("settles: requests still in flight after 15 s")
    checks: list[cc.Check] = []
    if outcome != "hang":
        try:
            checks = [*entry.check(world, ctx, outcome == "ok")]
        except Exception as exc:  # noqa: BLE001 - a check that cannot finish is a finding
            checks = [("checks_complete", False, f"{type(exc).__name__}: {exc}")]
        checks += cc.no_blind_resend(world.requests_since(mark), ctx)
        for name, ok, detail in checks:
            result.checked += 1
            if not ok:
                result.violations.append(f"{name}: {detail}")
    result.seconds = time.monotonic() - started
    return result
