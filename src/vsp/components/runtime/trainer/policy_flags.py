"""Command-line flags of the checkpoint policy, for any trainer built on argparse.

``add_policy_flags(parser)`` adds the flags that choose when a trainer saves; after parsing,
``policy_from_args(args, environ)`` builds the ``CheckpointPolicy`` they ask for:

* ``--checkpoint-every-steps N`` (fixed steps) or ``--checkpoint-interval auto|SECONDS``
  (default ``auto``: the strategy's interval from the measured save costs), not both;
* ``--mtbf-seconds``: the prior mean time between preemptions of the whole job, in seconds
  (``$VSP_MTBF_SECONDS``, default 3600). A job on N Spot nodes is interrupted by the first of
  them to be reclaimed: with nodes preempted independently, the job's is the node's over N;
* ``--checkpoint-strategy`` and ``--p-notice-fail``: the auto interval's strategy and its prior
  that a notice save fails (``strategies``);
* ``--notice-seconds``: the preemption notice, in seconds (30 on GCP Spot).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import policy as checkpoint_policy
from vsp.components.runtime.trainer import strategies

MTBF_ENV = "VSP_MTBF_SECONDS"


def add_policy_flags(
    parser: argparse.ArgumentParser, every_steps_aliases: Sequence[str] = ()
) -> None:
    """Adds the checkpoint policy's flags to ``parser``.

    Args:
        parser: The trainer's parser.
        every_steps_aliases: More option strings for ``--checkpoint-every-steps`` (a trainer's
            older name of it, e.g. ``--save-every``).
    """
    when = parser.add_mutually_exclusive_group()
    when.add_argument(
        "--checkpoint-every-steps",
        *every_steps_aliases,
        dest="checkpoint_every_steps",
        type=int,
        help="save every N steps",
    )
    when.add_argument(
        "--checkpoint-interval",
        help="'auto' (default: the --checkpoint-strategy interval from the measured save costs"
        " and --mtbf-seconds) or seconds",
    )
    parser.add_argument(
        "--mtbf-seconds",
        type=float,
        default=None,
        help=f"prior mean time between preemptions of the job, s, for 'auto' (${MTBF_ENV},"
        f" default {checkpoint_policy.DEFAULT_MTBF_S:g}; on N nodes the job's is the node's / N)",
    )
    parser.add_argument(
        "--checkpoint-strategy",
        choices=sorted(strategies.STRATEGIES),
        default="notice-first",
        help="'auto' interval: notice-first (default; periodic saves insure a failed notice save"
        " when a save fits in the notice, else Daly) or young-daly",
    )
    parser.add_argument(
        "--p-notice-fail",
        type=float,
        default=strategies.DEFAULT_P_NOTICE_FAIL,
        help="prior probability that a save on the notice fails, for notice-first (default"
        f" {strategies.DEFAULT_P_NOTICE_FAIL:g}; the checkpoint history's notice outcomes update"
        " it)",
    )
    parser.add_argument(
        "--notice-seconds",
        type=float,
        default=checkpoint_policy.GCP_SPOT_NOTICE_S,
        help=f"preemption notice window, s (default {checkpoint_policy.GCP_SPOT_NOTICE_S:g}, GCP"
        " Spot)",
    )


def policy_from_args(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> checkpoint_policy.CheckpointPolicy:
    """The checkpoint policy the flags of ``add_policy_flags`` ask for.

    Raises:
        errors.UserError: ``$VSP_MTBF_SECONDS`` is not a number, or a value the policy refuses
            (the message names it).
    """
    mtbf = args.mtbf_seconds
    if mtbf is None:
        text = environ.get(MTBF_ENV) or str(checkpoint_policy.DEFAULT_MTBF_S)
        try:
            mtbf = float(text)
        except ValueError:
            raise errors.UserError(f"{MTBF_ENV}={text!r} is not a number") from None
    strategy = strategies.from_name(args.checkpoint_strategy, p_notice_fail=args.p_notice_fail)
    common = {"mtbf_s": mtbf, "strategy": strategy, "notice_s": args.notice_seconds}
    if args.checkpoint_every_steps is not None:
        return checkpoint_policy.CheckpointPolicy(every_steps=args.checkpoint_every_steps, **common)
    return checkpoint_policy.CheckpointPolicy.parse(args.checkpoint_interval or "auto", **common)
