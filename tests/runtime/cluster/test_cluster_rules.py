"""Tests of cluster spec validation: every rule names the field, the value and the fix."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest
import yaml

from vsp.components.runtime.cluster import rules, slurm_values
from vsp.components.runtime.core import errors

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
FULL = yaml.safe_load((DATA / "cluster_full.yaml").read_text())
SLURM = "orchestrator_spec.slurm_spec"


CASES = yaml.safe_load((DATA / "cluster_rule_cases.yaml").read_text())


def _walk(data: dict, path: str):
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    for part in parts[:-1]:
        data = data[part]
    return data, parts[-1]


def mutated(case: dict) -> dict:
    """The full spec with a case's ``unset`` paths deleted, then its ``set`` paths assigned."""
    data = copy.deepcopy(FULL)
    for path in case.get("unset") or []:
        parent, key = _walk(data, path)
        del parent[key]
    for path, value in (case.get("set") or {}).items():
        parent, key = _walk(data, path)
        parent[key] = copy.deepcopy(value)
    return data


def check(data: dict, cluster_id: str | None = "llmtrain") -> None:
    """Parses and validates like a component does."""
    rules.validate_cluster(rules.parse_cluster_spec(data), cluster_id)


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES["invalid"]])
def test_invalid_spec_names_field_value_and_fix(case):
    with pytest.raises(errors.SpecValidationError) as caught:
        check(mutated(case), case.get("cluster_id", "llmtrain"))

    error = caught.value
    assert case["field"] in error.fields, error
    message = str(error)
    assert str(case["text"]) in message, message
    assert "Fix:" in message


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES["valid"]])
def test_valid_variants_pass(case):
    check(mutated(case))


def test_there_are_at_least_35_distinct_invalid_specs():
    ids = [case["id"] for case in CASES["invalid"]]
    assert len(set(ids)) == len(ids) >= 35
    shapes = [json.dumps(mutated(case), sort_keys=True) for case in CASES["invalid"]]
    assert len(set(shapes)) >= 35


def test_the_full_spec_is_valid():
    check(copy.deepcopy(FULL))


def test_every_problem_is_reported_at_once():
    case = {
        "set": {
            "display_name": "Too-Long-Name",
            "node_pools.1.provisioning_model": "STANDARD",
            f"{SLURM}.config.Prolog": "/x",
            f"{SLURM}.default_partition_id": "gpu",
        }
    }

    with pytest.raises(errors.SpecValidationError) as caught:
        check(mutated(case), "bad-id")

    assert caught.value.fields == [
        "cluster_id",
        "display_name",
        "node_pools[1].provisioning_model",
        f"{SLURM}.default_partition_id",
        f"{SLURM}.config.Prolog",
    ]
    assert "(5 problems)" in str(caught.value)
    assert caught.value.exit_code == errors.EXIT_USER_ERROR


def test_cluster_id_may_have_a_hyphen_without_slurm_and_none_skips_the_check():
    with pytest.raises(errors.SpecValidationError) as caught:
        check(mutated({"unset": ["orchestrator_spec"]}), "llm-train")
    assert caught.value.fields == [SLURM]

    check(copy.deepcopy(FULL), None)


def test_too_many_labels():
    labels = {f"k{i}": "v" for i in range(65)}

    with pytest.raises(errors.SpecValidationError) as caught:
        check(mutated({"set": {"labels": labels}}))

    assert caught.value.fields == ["labels"]
    assert "'65 labels'" in str(caught.value) and "64" in str(caught.value)


def test_load_json_and_yaml_by_extension_or_content(tmp_path):
    as_json = tmp_path / "spec.json"
    as_json.write_text(json.dumps(FULL))
    json_text = tmp_path / "spec.txt"
    json_text.write_text(json.dumps(FULL))
    yaml_text = tmp_path / "spec"
    yaml_text.write_text(yaml.safe_dump(FULL))

    specs = [rules.load_cluster_spec(p) for p in (as_json, str(json_text), yaml_text)]

    expected = rules.parse_cluster_spec(FULL)
    assert specs == [expected] * 3


@pytest.mark.parametrize(
    ("name", "text", "hint"),
    [
        ("missing.yaml", None, "Cannot read"),
        ("bad.yaml", "display_name: [unclosed\n", "Not valid YAML"),
        ("bad.json", "{display_name: 1}", "Not valid JSON"),
        ("list.yaml", "- a\n- b\n", "must be a mapping"),
    ],
)
def test_load_errors_are_spec_errors(tmp_path, name, text, hint):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)

    with pytest.raises(errors.SpecValidationError) as caught:
        rules.load_cluster_spec(path)

    assert hint in str(caught.value)


def test_parse_accepts_a_spec_as_is():
    spec = rules.parse_cluster_spec(FULL)

    assert rules.parse_cluster_spec(spec) is spec


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("REQUEUE", True),
        ("SUSPEND,GANG", True),
        ("gang,suspend", True),
        ("CANCEL,WITHIN", True),
        ("OFF", True),
        ("SUSPEND", False),
        ("OFF,REQUEUE", False),
        ("", False),
        ("REQUEUE,,GANG", False),
    ],
)
def test_preempt_mode_values(value, ok):
    assert (slurm_values.check_preempt_mode(value) is None) is ok


def test_partition_scope_suspend_does_not_need_gang():
    assert slurm_values.check_preempt_mode("SUSPEND", cluster_scope=False) is None


@pytest.mark.parametrize(
    ("key", "scope", "refused"),
    [
        ("Prolog", "cluster", True),
        ("PROLOG", "node", True),
        ("PrologFlags", "cluster", False),
        ("HEALTH_CHECK_NODE_STATE", "cluster", True),
        ("requeue_exit_hold", "cluster", True),
        ("StoragePass", "cluster", True),
        ("StorageUser", "cluster", True),
        ("AccountingStorageHost", "cluster", False),
        ("Default", "partition", True),
        ("Default", "cluster", False),
    ],
)
def test_refused_keys_ignore_case_and_underscores(key, scope, refused):
    norm = slurm_values.normalize_key(key)

    assert (slurm_values.refused_key(norm, scope) is not None) is refused


def test_reserved_label_keys_are_refused():
    # A user's vsp-expires-at would get a brand-new cluster reaped by the next reap.
    labels = {"team": "ml", "vsp-expires-at": "20200101t000000z", "vsp-teardown": "keep"}
    with pytest.raises(errors.SpecValidationError) as caught:
        check(mutated({"set": {"labels": labels}}))
    assert caught.value.fields == ["labels.vsp-expires-at", "labels.vsp-teardown"]
    assert "reserved for this tool" in str(caught.value)


def test_a_line_break_in_a_slurm_config_value_is_refused():
    # "1\nProlog=/tmp/x" would become two slurm.conf lines, smuggling in the refused Prolog.
    config = {**FULL["orchestrator_spec"]["slurm_spec"].get("config", {})}
    config["MaxJobCount"] = "1000\nProlog=/tmp/evil.sh"
    with pytest.raises(errors.SpecValidationError) as caught:
        check(mutated({"set": {f"{SLURM}.config": config}}))
    assert caught.value.fields == [f"{SLURM}.config.MaxJobCount"]
    assert "holds a line break" in str(caught.value)
