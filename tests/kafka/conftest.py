"""Kafka tests use the session broker and per-test topic fixtures of tests/conftest.py, and a schema registry of
their own where they need one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def schema_registry() -> Iterator[Any]:
    """A Confluent-compatible schema registry on 127.0.0.1 (tests/support/schema_registry.py), empty, for one test."""
    pytest.importorskip("confluent_kafka.schema_registry", reason="needs confluent-kafka[schemaregistry] (pip install -e '.[test]')")
    from support.schema_registry import LocalSchemaRegistry

    with LocalSchemaRegistry() as registry:
        yield registry
