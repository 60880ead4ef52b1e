"""`confluent_avro` and `confluent_protobuf` values → Arrow for the columnar path (`KafkaExtractor.to_arrow`): a poll's values decoded a field
at a time by `schemas.avro_datums`, with no Python dict per record, when nothing in the batch needs the row path.

A batch is taken whole only when every value is in Confluent's wire format with a schema id whose schema *is* the
output schema (writer and reader the same, so Avro resolves nothing: the output's own id, or one registered with the
identical schema; never for a merged output schema, which no producer writes), holds no tombstone, and every datum
decodes exactly to its end. Anything else (an older version, an unknown id, a bad payload, a key that is not UTF-8)
gives None, and the batch takes the row path, where each value is resolved or rejected with its offset.

`metadata_columns` are built a column at a time too: topic, partition, offset, timestamp, and the key under
`metadata_key: string` or `bytes`. Headers and `metadata_key: confluent_avro` have no columnar form: a task asking
for them keeps to the row path.

`confluent_protobuf` (`ConfluentProtobufColumns`) is taken the same way: every value in the wire format with message
indexes [0], all of one schema id whose first message is the output's and reads into it with no field lost, that
message flat (`schemas.protobuf_columns`), and every payload decoding exactly; anything else takes the row path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gobblin_py.builtin.sources.kafka.metadata import PREFIX, MessageDetails
from gobblin_py.builtin.sources.kafka.registry import HEADER, MAGIC, UndecodableValue
from gobblin_py.builtin.sources.kafka.settings import KafkaSettings

COLUMNAR_METADATA = frozenset({"key", "topic", "partition", "offset", "timestamp"})


def confluent_frames(values: Sequence[bytes | None], least: int) -> tuple[bytes, Any, Any, Any] | None:
    """Confluent-framed values (a magic byte, a big-endian schema id, the payload) as one buffer, each value's start
    and end in it, and its schema id; None for a tombstone, a value shorter than `least` or one without the magic."""
    n = len(values)
    try:
        data = b"".join(values)  # type: ignore[arg-type]
    except TypeError:
        return None  # a tombstone: the row path rejects it
    lengths = np.fromiter(map(len, values), np.int64, n)  # type: ignore[arg-type]
    ends = np.cumsum(lengths)
    starts = ends - lengths
    if n and lengths.min() < least:
        return None
    raw = np.frombuffer(data, np.uint8)
    if n and (raw[starts] != MAGIC).any():
        return None
    ids = np.zeros(n, np.uint32)
    for i in range(1, HEADER.size):  # the big-endian schema id after the magic byte
        ids = (ids << np.uint32(8)) | raw[starts + i]
    return data, starts, ends, ids


class ConfluentAvroColumns:
    """Turns a batch of `confluent_avro` values into one Arrow record batch of the output schema's Arrow mapping (with
    the metadata columns), or None for a batch the row path must take."""

    def __init__(self, decoder: Any, reads_as_output: Callable[[int], bool], arrow_schema: Any,
                 settings: KafkaSettings, topic: str, partition: int) -> None:
        self._decoder = decoder  # an AvroDatumDecoder of the value schema
        self._reads_as_output = reads_as_output
        self._known: dict[int, bool] = {}  # schema id → whether its values decode straight into the output schema
        self.arrow_schema = arrow_schema
        self._settings = settings
        self._topic, self._partition = topic, partition

    @classmethod
    def of(cls, settings: KafkaSettings, value_schema: Any, output_schema: Any, value_decoder: Any, topic: str,
           partition: int) -> ConfluentAvroColumns | None:
        """The columnar reader of a `confluent_avro` task whose value schema `schemas.avro_datums` decodes and whose
        metadata columns all have a columnar form; None otherwise (the task keeps to the row path)."""
        import pyarrow as pa

        from gobblin_py.builtin.schemas.arrow import arrow_mapping
        from gobblin_py.builtin.schemas.avro_datums import AvroDatumDecoder

        if settings.deserializer != "confluent_avro" or not set(settings.metadata_columns) <= COLUMNAR_METADATA:
            return None
        if settings.avro_keys or settings.tombstones == "delete":  # tombstones: records the row path makes
            return None
        decoder = AvroDatumDecoder.for_schema(value_schema)
        if decoder is None:
            return None
        mapping = arrow_mapping(output_schema).schema  # the value fields, then the metadata fields
        values = decoder.arrow_schema  # the value fields, timestamps marked as the row path's datetimes
        schema = pa.schema([*values, *list(mapping)[len(values):]])
        return cls(decoder, value_decoder.writes_output, schema, settings, topic, partition)

    def __call__(self, values: Sequence[bytes | None], offsets: Callable[[], Sequence[int]],
                 details: Callable[[], Sequence[MessageDetails]]) -> Any | None:
        import pyarrow as pa

        n = len(values)
        framed = confluent_frames(values, HEADER.size)
        if framed is None:
            return None
        data, starts, ends, ids = framed
        for schema_id in np.unique(ids).tolist():
            if not self._qualifies(schema_id):
                return None
        values_batch = self._decoder.decode(data, starts + HEADER.size, ends)
        if values_batch is None:
            return None
        return self._with_metadata(values_batch, n, offsets, details, pa)

    def _qualifies(self, schema_id: int) -> bool:
        known = self._known.get(schema_id)
        if known is None:
            try:
                known = self._reads_as_output(schema_id)
            except UndecodableValue:
                known = False
            self._known[schema_id] = known
        return known

    def _with_metadata(self, values_batch: Any, n: int, offsets: Callable[[], Sequence[int]],
                       details: Callable[[], Sequence[MessageDetails]], pa: Any) -> Any | None:
        """The decoded values' columns, then the metadata columns the job asks for (None: the row path decides)."""
        columns = list(values_batch.columns)
        if self._settings.metadata_columns:
            extra = self._metadata(n, offsets, details, pa)
            if extra is None:
                return None
            columns.extend(extra)
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow_schema)

    def _metadata(self, n: int, offsets: Callable[[], Sequence[int]], details: Callable[[], Sequence[MessageDetails]],
                  pa: Any) -> list[Any] | None:
        """The metadata columns as the row path makes them (`metadata.metadata_of`); None where a key is not UTF-8
        under `metadata_key: string` (that record is a bad one on the row path)."""
        s = self._settings
        found = details() if {"key", "timestamp"} & set(s.metadata_columns) else ()
        out = []
        for column in s.metadata_columns:
            kind = self.arrow_schema.field(PREFIX + column).type
            if column == "topic":
                out.append(pa.repeat(pa.scalar(self._topic, kind), n))
            elif column == "partition":
                out.append(pa.repeat(pa.scalar(self._partition, kind), n))
            elif column == "offset":
                out.append(pa.array(offsets(), kind))
            elif column == "timestamp":
                out.append(pa.array([d.timestamp if d.timestamp is not None and d.timestamp >= 0 else None
                                     for d in found], kind))
            else:  # the key, as bytes or as UTF-8 text
                keys = pa.array([d.key for d in found], pa.binary())
                if pa.types.is_string(kind):
                    try:
                        keys = keys.cast(kind)
                    except pa.ArrowInvalid:
                        return None
                out.append(keys)
        return out


class ConfluentProtobufColumns(ConfluentAvroColumns):
    """Turns a batch of `confluent_protobuf` values into one Arrow record batch of the output schema's Arrow mapping
    (with the metadata columns), or None for a batch the row path must take."""

    def __init__(self, value_decoder: Any, output_schema: Any, arrow_schema: Any, settings: KafkaSettings, topic: str,
                 partition: int) -> None:
        super().__init__(None, lambda _: False, arrow_schema, settings, topic, partition)
        self._value_decoder = value_decoder  # the row path's ConfluentProtobufDecoder: which schema ids qualify
        self._output_schema = output_schema  # the value's Avro record (no metadata fields)
        self._decoders: dict[int, Any] = {}  # schema id → its ProtobufColumnsDecoder, or None (row path)

    @classmethod
    def of_protobuf(cls, settings: KafkaSettings, value_schema: Any, output_schema: Any, value_decoder: Any,
                    topic: str, partition: int) -> ConfluentProtobufColumns | None:
        """The columnar reader of a `confluent_protobuf` task whose metadata columns all have a columnar form; None
        otherwise. Whether a schema id's message is flat is decided per id, as its values come."""
        from gobblin_py.builtin.schemas.arrow import arrow_mapping
        from gobblin_py.errors import ConfigError

        if settings.deserializer != "confluent_protobuf" or not set(settings.metadata_columns) <= COLUMNAR_METADATA:
            return None
        if settings.avro_keys or settings.tombstones == "delete" or not isinstance(value_schema, dict):
            return None
        try:
            schema = arrow_mapping(output_schema).schema
        except ConfigError:
            return None
        return cls(value_decoder, value_schema, schema, settings, topic, partition)

    def _columns_of(self, schema_id: int) -> Any:
        from gobblin_py.builtin.schemas.protobuf_columns import ProtobufColumnsDecoder

        if schema_id not in self._decoders:
            try:
                message = self._value_decoder.message_read_as_output(schema_id)
            except UndecodableValue:
                message = None
            self._decoders[schema_id] = None if message is None else \
                ProtobufColumnsDecoder.for_message(message, self._output_schema)
        return self._decoders[schema_id]

    def __call__(self, values: Sequence[bytes | None], offsets: Callable[[], Sequence[int]],
                 details: Callable[[], Sequence[MessageDetails]]) -> Any | None:
        import pyarrow as pa

        n = len(values)
        framed = confluent_frames(values, HEADER.size + 1) if n else None
        if framed is None:
            return None
        data, starts, ends, ids = framed
        if (np.frombuffer(data, np.uint8)[starts + HEADER.size] != 0).any():  # message indexes other than [0]
            return None
        if not (ids == ids[0]).all():
            return None  # values of several schema ids: the row path reads each with its own
        decoder = self._columns_of(int(ids[0]))
        if decoder is None:
            return None
        values_batch = decoder.decode(data, starts + HEADER.size + 1, ends)
        if values_batch is None:
            return None
        return self._with_metadata(values_batch, n, offsets, details, pa)
