"""Tests of ``ensure_association`` (the REST form of sacctmgr) against the fake REST client."""

from __future__ import annotations

import pytest
from slurm_fakes import FakeRest, err

from vsp.components.runtime.core import errors
from vsp.components.runtime.slurm import error_codes

# ----- accounting -----------------------------------------------------------------------------


class FakeSlurmdb:
    """Tiny stateful slurmdb behind the fake proxy: lists and adds accounts/users/associations."""

    def __init__(self, fake: FakeRest, *, accounts=(), users=(), associations=()):
        self.tables = {
            "accounts": [{"name": a} for a in accounts],
            "users": [{"name": u} for u in users],
            "associations": [dict(a) for a in associations],
        }
        for table in self.tables:
            path = f"/slurmdb/v0.0.42/{table}"
            fake.handle("GET", path, lambda body, t=table: {t: self.tables[t], "errors": []})
            fake.handle("POST", path, lambda body, t=table: self.add(t, body))

    def add(self, table: str, body: dict) -> dict:
        self.tables[table].extend(body["body"][table])
        return {"errors": [], "warnings": []}


def test_ensure_association_adds_what_is_missing_then_nothing(fake, client):
    FakeSlurmdb(fake)
    report = client.ensure_association("ml", "alice", ["spot", "ondemand"], organization="acme")
    assert report.changed
    assert report.accounts == ["ml"] and report.users == ["alice"]
    assert report.associations == [("ml", "alice", "spot"), ("ml", "alice", "ondemand")]
    posts = [c["body"] for c in fake.calls if c["body"]["method"] == "HTTP_METHOD_POST"]
    assert posts == [
        {
            "method": "HTTP_METHOD_POST",
            "path": "/slurmdb/v0.0.42/accounts",
            "body": {
                "accounts": [
                    {
                        "name": "ml",
                        "description": "ml (added by vertex-slurm-pipelines)",
                        "organization": "acme",
                    }
                ]
            },
        },
        {
            "method": "HTTP_METHOD_POST",
            "path": "/slurmdb/v0.0.42/users",
            "body": {"users": [{"name": "alice", "default": {"account": "ml"}}]},
        },
        {
            "method": "HTTP_METHOD_POST",
            "path": "/slurmdb/v0.0.42/associations",
            "body": {
                "associations": [
                    {"account": "ml", "user": "alice", "partition": "spot"},
                    {"account": "ml", "user": "alice", "partition": "ondemand"},
                ]
            },
        },
    ]
    assert [c["idempotent"] for c in fake.calls] == [True, True, True, False, False, False]
    fake.calls.clear()
    again = client.ensure_association("ml", "alice", ["spot", "ondemand"])
    assert not again.changed
    assert fake.slurm_calls == [("GET", "/slurmdb/v0.0.42/associations")]


def test_ensure_association_adds_only_the_missing_partition(fake, client):
    FakeSlurmdb(
        fake,
        accounts=["ml"],
        users=["alice"],
        associations=[{"account": "ml", "user": "alice", "partition": "spot"}],
    )
    report = client.ensure_association("ml", "alice", ["spot", "ondemand"], cluster="c1")
    assert report.accounts == [] and report.users == []
    assert [c for c in fake.slurm_calls if c[0] == "POST"] == [
        ("POST", "/slurmdb/v0.0.42/associations")
    ]
    assert fake.calls[-1]["body"]["body"] == {
        "associations": [
            {"account": "ml", "user": "alice", "partition": "ondemand", "cluster": "c1"}
        ]
    }


def test_partitionless_association_covers_every_partition(fake, client):
    FakeSlurmdb(fake, associations=[{"account": "ml", "user": "alice", "partition": ""}])
    assert not client.ensure_association("ml", "alice", ["spot"]).changed
    assert len(fake.calls) == 1


def test_ensure_association_without_operator_rights(fake, client):
    FakeSlurmdb(fake, accounts=["ml"], users=["alice"])
    denied = {"errors": [err(2002, "Access/permission denied")]}
    fake.on("POST", "/slurmdb/v0.0.42/associations", (denied, 403))
    with pytest.raises(error_codes.SlurmRejectedError, match="AdminLevel") as caught:
        client.ensure_association("ml", "alice", ["spot"])
    assert isinstance(caught.value, errors.UserError)


def test_ensure_association_validates_names_before_any_call(fake, client):
    with pytest.raises(errors.SpecValidationError) as caught:
        client.ensure_association("bad account", "alice", ["spot", ""])
    assert caught.value.fields == ["account", "partitions[1]"]
    with pytest.raises(errors.SpecValidationError, match="partitions"):
        client.ensure_association("ml", "alice", [])
    assert fake.calls == []
