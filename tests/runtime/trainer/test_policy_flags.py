"""The checkpoint policy's command-line flags, shared by the example trainers."""

from __future__ import annotations

import argparse

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import policy_flags, strategies


def parse(argv: list[str], aliases: tuple[str, ...] = ()) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    policy_flags.add_policy_flags(parser, every_steps_aliases=aliases)
    return parser.parse_args(argv)


def test_by_default_the_interval_is_auto_from_the_env_mtbf_and_a_30_s_notice() -> None:
    policy = policy_flags.policy_from_args(parse([]), {"VSP_MTBF_SECONDS": "1800"})
    assert policy.mode == "auto"
    assert (policy.prior_mtbf_s, policy.notice_s) == (1800.0, 30.0)
    assert isinstance(policy.strategy, strategies.NoticeFirst)
    assert policy_flags.policy_from_args(parse([]), {}).prior_mtbf_s == 3600.0


def test_flags_choose_steps_seconds_strategy_and_notice() -> None:
    every = parse(["--checkpoint-every-steps", "15", "--mtbf-seconds", "30"])
    policy = policy_flags.policy_from_args(every, {"VSP_MTBF_SECONDS": "999"})
    assert (policy.mode, policy.every_steps, policy.prior_mtbf_s) == ("steps", 15, 30.0)
    timed = parse(["--checkpoint-interval", "90", "--notice-seconds", "0.5"])
    policy = policy_flags.policy_from_args(timed, {})
    assert (policy.mode, policy.every_seconds, policy.notice_s) == ("seconds", 90.0, 0.5)
    young = parse(["--checkpoint-strategy", "young-daly"])
    assert isinstance(policy_flags.policy_from_args(young, {}).strategy, strategies.YoungDaly)


def test_an_older_name_of_the_steps_flag_is_the_same_flag() -> None:
    args = parse(["--save-every", "10"], aliases=("--save-every",))
    assert policy_flags.policy_from_args(args, {}).every_steps == 10


def test_steps_and_an_interval_together_are_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        parse(["--checkpoint-every-steps", "5", "--checkpoint-interval", "auto"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_bad_values_say_which_one_is_wrong() -> None:
    with pytest.raises(errors.UserError, match="VSP_MTBF_SECONDS='soon' is not a number"):
        policy_flags.policy_from_args(parse([]), {"VSP_MTBF_SECONDS": "soon"})
    with pytest.raises(errors.UserError, match="neither 'auto' nor seconds"):
        policy_flags.policy_from_args(parse(["--checkpoint-interval", "often"]), {})
    with pytest.raises(errors.UserError, match="every_steps must be an int >= 1"):
        policy_flags.policy_from_args(parse(["--checkpoint-every-steps", "0"]), {})
