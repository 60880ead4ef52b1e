"""The overview's JSON (`status --json`, /api/jobs): a dataset's view, its watermarks no longer deep-copied, gives the
same JSON as the `asdict` copy it replaced."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import orjson
import pytest

from gobblin_py.api.lag import DatasetLag
from gobblin_py.operating.overview import DatasetView


def _before(view: DatasetView) -> dict[str, Any]:
    """`DatasetView.to_json` at 69b162b."""
    out = {k: v for k, v in asdict(view).items() if k != "lag"}
    out["lag"] = view.lag.to_json() if view.lag is not None else None
    return out


@pytest.mark.parametrize("lag", [None, DatasetLag("ev", bytes=10, files=2), DatasetLag("ev", records=None, error="down")])
def test_a_dataset_view_gives_the_json_the_deep_copy_gave(lag: DatasetLag | None) -> None:
    view = DatasetView(dataset="ev", watermarks={f"f-{i}.jsonl": i for i in range(1000)} | {"k": {"p": [1, {"q": "r"}]}},
                       state={"run_id": "r1", "source": {"tails": {"a": "1:x"}}, "key_stats": {"n": [1, 2]}},
                       committed_at="2026-12-06T00:00:00+00:00", last_run_id="r1", lag=lag, pending=True,
                       table={"uuid": "u", "columns": [{"id": 1}]}, unreadable=None)
    assert view.to_json() == _before(view)
    assert orjson.dumps(view.to_json(), option=orjson.OPT_INDENT_2) == orjson.dumps(_before(view), option=orjson.OPT_INDENT_2)
