"""`deserializer: confluent_json` with `json_schema_validation`: each value checked against its writer's JSON Schema.

Confluent's JSON Schema serializer writes magic byte 0, the schema id, then a JSON document; its deserializer validates
the document against that id's schema by default, and so does this one. One validator is compiled per schema id (once
per task), of the draft its `$schema` names, draft-07 without one (as Confluent's serializers assume). `format` is an
annotation, not an assertion (the JSON Schema specification's default, and the `jsonschema` package's). A document
that does not validate is a bad record whose reason names the schema id, the JSON path of the error and its message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gobblin_py.builtin.sources.kafka.registry import HEADER, ConfluentJsonDecoder, UndecodableValue, Unusable
from gobblin_py.errors import describe

MESSAGE_CHARS = 300
"""How much of a validation error's message a reason keeps (it may quote a long value)."""


def compile_validator(text: str) -> Any:
    """A `jsonschema` validator for the schema `text`: of the draft its `$schema` names, draft-07 without one; Unusable
    saying why for a schema that is not JSON, names an unknown draft, or is not a valid schema of its draft."""
    from jsonschema import Draft7Validator, SchemaError
    from jsonschema.validators import validator_for

    try:
        schema = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return Unusable(f"a JSON Schema that is not JSON ({exc})")
    if not isinstance(schema, (dict, bool)):
        return Unusable(f"a JSON Schema that is a {type(schema).__name__}, not an object")
    draft = schema.get("$schema") if isinstance(schema, dict) else None
    cls = validator_for(schema, default=Draft7Validator)
    if draft is not None and cls is Draft7Validator and draft.rstrip("#") not in _DRAFT7_IDS:
        return Unusable(f"a JSON Schema of an unknown draft ($schema {draft!r})")
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        return Unusable(f"not a valid JSON Schema of its draft: {_where(exc)}: {_short(exc.message)}")
    return cls(schema)


_DRAFT7_IDS = {"http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema"}


def _short(message: str) -> str:
    return message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS] + "…"


def _where(error: Any) -> str:
    """The JSON path of an error (`$` for the whole document; `$.items[2].id` inside it)."""
    return error.json_path


def first_error(validator: Any, document: Any) -> str:
    """Where and why `document` fails `validator` (called only for a document `is_valid` refused): the error
    `jsonschema.exceptions.best_match` picks, as its JSON path and message."""
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(document))
    if error is None:  # is_valid said no; a second look says yes (not expected): say so rather than guess
        return "$: the document does not match its JSON Schema"
    return f"{_where(error)}: {_short(error.message)}"


class ValidatingJsonDecoder(ConfluentJsonDecoder):
    """`confluent_json` values parsed, then validated against their writer's JSON Schema (its validator compiled once
    per schema id): a document it refuses is UndecodableValue naming the schema id, the path and the message."""

    def _accept(self, schema: Any) -> Any:
        return compile_validator(schema.schema_str)

    def __call__(self, raw: bytes) -> Any:
        schema_id = self.schema_id(raw)
        validator = self.schema(schema_id)
        document = orjson.loads(memoryview(raw)[HEADER.size:])
        if not self._valid(validator, document, schema_id):
            raise UndecodableValue(f"schema id {schema_id}: the document does not match its JSON Schema at "
                                   f"{first_error(validator, document)}")
        return document

    @staticmethod
    def _valid(validator: Any, document: Any, schema_id: int) -> bool:
        from referencing.exceptions import Unresolvable

        try:
            return bool(validator.is_valid(document))
        except Unresolvable as exc:  # a $ref to a schema the registry does not hand over (remote or another subject's)
            raise UndecodableValue(f"schema id {schema_id}: its JSON Schema has a $ref that cannot be resolved "
                                   f"({describe(exc)})") from None

    def all_valid(self, values: Sequence[bytes]) -> bool:
        """Whether every value (each with the header and a usable JSON Schema's id: the caller checked) parses and
        validates: the columnar path takes a batch only then, else the row path judges each value (and rejects the
        invalid ones with their offsets)."""
        for raw in values:
            try:
                schema_id = self.schema_id(raw)
                if not self._valid(self.schema(schema_id), orjson.loads(memoryview(raw)[HEADER.size:]), schema_id):
                    return False
            except (UndecodableValue, orjson.JSONDecodeError):
                return False
        return True
