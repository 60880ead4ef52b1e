"""What a Kafka WorkUnit tells its extractor, typed: the partition, the client that reads it, and the output schemas
planned for its values and keys, so every task of a run reads into the schema the driver planned."""

from __future__ import annotations

from typing import Literal

from gobblin_py.api.split import Split
from gobblin_py.builtin.sources.kafka.registry import OutputSchema
from gobblin_py.errors import SourceError


class KafkaSplit(Split):
    """One partition's offset range (the range itself is the WorkUnit's watermarks) and how to read it."""

    topic: str
    partition: int
    client: Literal["kafka-python", "confluent"]
    """The client the extractor reads with (`source.client` at planning): it picks the extractor class."""
    value_schema: OutputSchema | None = None
    """The value subject's output schema planned (`confluent_avro`, `confluent_protobuf`); None for other values."""
    key_schema: OutputSchema | None = None
    """The key subject's output schema planned (`metadata_key: confluent_avro`); None otherwise."""

    def planned(self, part: Literal["value", "key"]) -> OutputSchema:
        """The output schema planned for the values or keys; SourceError when the plan has none (a planner's bug)."""
        found = self.value_schema if part == "value" else self.key_schema
        if found is None:
            raise SourceError(f"{self.topic}/{self.partition}: the work unit carries no planned {part} schema, which "
                              "this source's settings need; plan the run again")
        return found
