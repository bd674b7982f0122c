"""Tests of the error taxonomy."""

from __future__ import annotations

import pytest

from vsp.components.runtime.core import errors


@pytest.mark.parametrize(
    ("status", "body", "kind", "taxonomy"),
    [
        (
            400,
            {"error": {"status": "INVALID_ARGUMENT", "message": "m"}},
            errors.InvalidArgumentError,
            errors.UserError,
        ),
        (
            403,
            {"error": {"status": "PERMISSION_DENIED"}},
            errors.PermissionDeniedError,
            errors.UserError,
        ),
        (404, {"error": {"status": "NOT_FOUND"}}, errors.NotFoundError, errors.ApiError),
        (409, {"error": {"status": "ALREADY_EXISTS"}}, errors.AlreadyExistsError, errors.ApiError),
        (409, {"error": {"status": "ABORTED"}}, errors.UnavailableError, errors.TransientError),
        (
            429,
            {"error": {"status": "RESOURCE_EXHAUSTED"}},
            errors.UnavailableError,
            errors.TransientError,
        ),
        (500, "oops", errors.UnavailableError, errors.TransientError),
        (503, {}, errors.UnavailableError, errors.TransientError),
        (504, {}, errors.UnavailableError, errors.TransientError),
    ],
)
def test_api_errors_are_classified_by_status(status, body, kind, taxonomy):
    error = errors.api_error_from_response(status, body, method="GET", url="http://h/x")
    assert type(error) is kind
    assert isinstance(error, taxonomy)
    assert error.http_status == status
    assert "GET http://h/x" in str(error)


def test_operation_errors_are_classified_by_rpc_code():
    stockout = errors.operation_error(
        "ops/1", {"code": 8, "message": "ZONE_RESOURCE_POOL_EXHAUSTED"}
    )
    assert isinstance(stockout, errors.TransientError)
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in str(stockout)
    rejected = errors.operation_error("ops/2", {"code": 3, "message": "bad"})
    assert isinstance(rejected, errors.UserError)
    unknown = errors.operation_error("ops/3", {"code": 2})
    assert not isinstance(unknown, (errors.UserError, errors.TransientError))


def test_exit_codes_are_distinct_by_kind():
    assert errors.exit_code_for(errors.UserError("x")) == 2
    assert errors.exit_code_for(errors.TransientError("x")) == 75
    assert errors.exit_code_for(errors.InternalError("x")) == 70
    assert errors.exit_code_for(RuntimeError("x")) == 70


def test_spec_validation_error_lists_every_problem():
    error = errors.SpecValidationError(
        "cluster spec",
        [
            errors.SpecProblem("a.b", 3, "too big.", "use 2."),
            errors.SpecProblem("c", None, "missing.", "set c."),
        ],
    )
    assert error.fields == ["a.b", "c"]
    assert "2 problems" in str(error)
    assert "a.b = 3: too big. Fix: use 2." in str(error)
    assert "c = <missing>: missing. Fix: set c." in str(error)
