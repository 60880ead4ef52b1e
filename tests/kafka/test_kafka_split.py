"""A Kafka WorkUnit's split: what the extractor reads (partition, client, planned schemas) travels typed in the split,
and the props keep only what the dataset's state keeps. No broker needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import TopicPartition

from gobblin_py.api import TaskContext
from gobblin_py.api.split import SplitMismatch
from gobblin_py.builtin.sources.kafka.confluent import ConfluentKafkaExtractor
from gobblin_py.builtin.sources.kafka.enumerator import workunit
from gobblin_py.builtin.sources.kafka.extractor import KafkaExtractor
from gobblin_py.builtin.sources.kafka.identity import TopicIdentity
from gobblin_py.builtin.sources.kafka.registry import KEY, VALUE, OutputSchema
from gobblin_py.builtin.sources.kafka.source import KafkaSource
from gobblin_py.builtin.sources.kafka.split import KafkaSplit
from gobblin_py.runtime.planning import check_splits

VALUE_OUT = OutputSchema("ev-value", 3, 31, {"type": "record", "name": "Ev", "fields": [{"name": "id", "type": "long"}]},
                         (1, 2, 3), "f" * 32)
KEY_OUT = OutputSchema("ev-key", 1, 7, {"type": "string"})


def _settings(**more: object) -> KafkaSource.Settings:
    return KafkaSource.Settings.model_validate({"bootstrap_servers": "127.0.0.1:9", "topics": ["ev"], **more})


def test_the_split_carries_what_the_extractor_reads_and_the_props_only_what_the_state_keeps() -> None:
    identity = TopicIdentity("cluster", {"ev": "topic-id"})
    wu = workunit(_settings(client="confluent"), TopicPartition("ev", 3), 10, 20, identity, {VALUE: VALUE_OUT, KEY: KEY_OUT})
    split = KafkaSplit.of(wu)
    assert (split.topic, split.partition, split.client) == ("ev", 3, "confluent")
    assert split.planned("value") == VALUE_OUT and split.planned("key") == KEY_OUT
    assert wu.props == {"state.topic_ids": {"3": "topic-id"}, "state.value_schema": VALUE_OUT.identity(),
                        "state.value_schema_evolved": VALUE_OUT.evolved(), "state.key_schema": KEY_OUT.identity()}
    check_splits([wu], "kafka", KafkaSource.split_type)


def test_a_split_without_a_planned_schema_says_so_and_a_unit_without_a_split_is_refused_at_planning() -> None:
    wu = workunit(_settings(), TopicPartition("ev", 0), 0, 5, TopicIdentity("cluster", {}, {}, {("ev", 0): (0, 1)}))
    assert wu.props == {"state.first_records": {"0": [0, 1]}}
    with pytest.raises(Exception, match="carries no planned value schema"):
        KafkaSplit.of(wu).planned("value")
    with pytest.raises(SplitMismatch, match="carries no KafkaSplit"):
        KafkaSplit.of(type(wu)(wu.id, wu.dataset, wu.watermark_key, 0, 5))
    with pytest.raises(Exception, match="does not fit KafkaSplit"):
        check_splits([type(wu)(wu.id, wu.dataset, wu.watermark_key, 0, 5)], "kafka", KafkaSource.split_type)


@pytest.mark.parametrize(("client", "extractor"), [("kafka-python", KafkaExtractor), ("confluent", ConfluentKafkaExtractor)])
def test_the_splits_client_picks_the_extractor(tmp_path: Path, client: str, extractor: type) -> None:
    wu = workunit(_settings(client=client), TopicPartition("ev", 1), 0, 5, TopicIdentity("cluster", {"ev": "id"}))
    context = TaskContext("job", "run", wu, 1, tmp_path, lambda *a, **k: None)
    got = KafkaSource(_settings(client="kafka-python")).get_extractor(wu, context)
    assert type(got) is extractor and (got.topic, got.partition) == ("ev", 1)
