"""Fork operators, each alone: identity (every branch) and by_field (route by a value)."""

from __future__ import annotations

from typing import Any

import pytest

from gobblin_py.builtin.forks import ByFieldFork, IdentityFork
from gobblin_py.errors import TaskError

BRANCHES = ["eu", "us", "other"]


def _by_field(**settings: Any) -> ByFieldFork:
    fork = ByFieldFork(ByFieldFork.Settings.model_validate(settings))
    return fork


def test_identity_routes_every_record_to_every_branch() -> None:
    fork = IdentityFork(IdentityFork.Settings.model_validate({}))
    fork.open(BRANCHES, {"type": "json"})
    assert list(fork.route({"x": 1})) == [0, 1, 2]
    assert list(fork.route({})) == [0, 1, 2]
    assert IdentityFork.broadcast is True


def test_identity_single_branch() -> None:
    fork = IdentityFork(IdentityFork.Settings.model_validate({}))
    fork.open(["main"], None)
    assert list(fork.route({"x": 1})) == [0]


def test_by_field_routes_by_value() -> None:
    fork = _by_field(field="country", routes={"eu": ["DE", "FR"], "us": ["US"]}, default="other")
    fork.open(BRANCHES, None)
    assert list(fork.route({"country": "FR"})) == [0]
    assert list(fork.route({"country": "US"})) == [1]
    assert ByFieldFork.broadcast is False


def test_by_field_unmatched_goes_to_default_branch() -> None:
    fork = _by_field(field="country", routes={"eu": ["DE"], "us": ["US"]}, default="other")
    fork.open(BRANCHES, None)
    assert list(fork.route({"country": "JP"})) == [2]
    assert list(fork.route({})) == [2]


def test_by_field_unmatched_without_default_goes_nowhere() -> None:
    fork = _by_field(field="country", routes={"eu": ["DE"]})
    fork.open(BRANCHES, None)
    assert list(fork.route({"country": "JP"})) == []


def test_by_field_value_listed_for_two_branches_goes_to_both() -> None:
    fork = _by_field(field="country", routes={"eu": ["GB", "DE"], "other": ["GB"]})
    fork.open(BRANCHES, None)
    assert sorted(fork.route({"country": "GB"})) == [0, 2]
    assert list(fork.route({"country": "DE"})) == [0]


def test_by_field_route_naming_unknown_branch_fails_on_open() -> None:
    fork = _by_field(field="country", routes={"eu": ["DE"], "asia": ["JP"]})
    with pytest.raises(TaskError, match="asia") as info:
        fork.open(BRANCHES, None)
    assert "eu, us, other" in str(info.value)


def test_by_field_unknown_default_branch_fails_on_open() -> None:
    fork = _by_field(field="country", routes={"eu": ["DE"]}, default="rest")
    with pytest.raises(TaskError, match="rest"):
        fork.open(BRANCHES, None)
