"""The status page's charts say in words what they draw (their title and aria-label), for a screen reader too."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from gobblin_py.operating.server.charts import Bar, bar_chart


def test_a_chart_names_its_highest_value_and_zero_when_nothing_failed() -> None:
    none_failed = bar_chart("Failures", "failed", [Bar("a", (0.0,)), Bar("b", (0.0,))])
    assert 'aria-label="Failures: 2 runs, highest 0 failed"' in none_failed
    some = bar_chart("Records", "records", [Bar("a", (1500.0,)), Bar("b", (250.0,), failed=True)])
    assert "highest 1500 records" in some and "no runs yet" in bar_chart("Records", "records", [])
