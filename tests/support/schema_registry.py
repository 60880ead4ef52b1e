"""A Confluent-compatible schema registry for tests: a threaded HTTP server on 127.0.0.1, in memory.

No registry installs here (Confluent's is a JVM service), so the tests run confluent-kafka's own `SchemaRegistryClient`
and `AvroSerializer` against this server. It implements, as Confluent's REST API reference describes them, what those
clients call: register (`POST /subjects/{s}/versions`), lookup (`POST /subjects/{s}`), `GET /schemas/ids/{id}`,
`GET /subjects`, `GET /subjects/{s}/versions[/{v|latest}]`, `POST /compatibility/subjects/{s}/versions/{v|latest}`,
`GET/PUT /config[/{s}]`. Schemas are Avro, JSON Schemas (`schemaType: JSON`: held and served, never checked for
compatibility), or Protobuf (`schemaType: PROTOBUF`, in the serialized form confluent-kafka's ProtobufSerializer
sends: a base64 FileDescriptorProto, with `references` to the subjects of the files it imports; held and served as
sent, for any `format` asked, and always compatible: Confluent's Protobuf compatibility rules are not reimplemented);
ids are global (one schema text and its references, one id, whichever subject), versions per subject. Compatibility is checked with Apache Avro's own `ReaderWriterCompatibilityChecker` (Avro schema resolution:
added fields need defaults, removed fields are fine, int→long→float→double and string↔bytes promote), and a
registration it refuses is HTTP 409, as Confluent answers. Optional HTTP basic auth (`auth=(user, password)`).

    with LocalSchemaRegistry() as registry:
        SchemaRegistryClient({"url": registry.url})
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


class RegistryError(Exception):
    """An error answer: HTTP status, Confluent's error_code and message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class _Subject:
    versions: list[int] = field(default_factory=list)  # schema ids, version n at index n-1
    level: str | None = None  # the subject's own compatibility level (None: the global one)


def _canonical(text: str) -> str:
    """The schema's JSON with keys sorted and no spaces: two registrations of the same schema get the same id."""
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def _key(kind: str, text: str, references: list[dict[str, Any]]) -> str:
    """What makes two registrations the same schema: its type, its text (JSON canonical), its references."""
    return kind + (text if kind == "PROTOBUF" else _canonical(text)) + json.dumps(references, sort_keys=True)


def _parse(text: str, kind: str = "AVRO") -> Any:
    """Apache Avro's parsed schema (a JSON Schema: its JSON; Protobuf: its FileDescriptorProto), or a 422 as Confluent
    answers an invalid one (42201)."""
    import avro.schema

    try:
        if kind == "PROTOBUF":
            from google.protobuf import descriptor_pb2

            return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text.encode("ascii"), validate=True))
        return avro.schema.parse(text) if kind == "AVRO" else json.loads(text)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the client's invalid schema
        raise RegistryError(422, 42201, f"Invalid schema: {exc}") from None


def _readable(reader: str, writer: str) -> list[str]:
    """Why data written with `writer` cannot be read with `reader` (empty: it can), by Avro's schema resolution."""
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(_parse(reader), _parse(writer))
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    return sorted(result.messages) or ["incompatible"]


class SchemaRegistryState:
    """The registry's schemas, subjects and compatibility levels; thread-safe. The HTTP layer only maps to it."""

    def __init__(self, level: str = "BACKWARD") -> None:
        self.lock = threading.Lock()
        self.schemas: list[str] = []  # schema text, id n at index n-1
        self.by_text: dict[str, int] = {}
        self.kinds: dict[int, str] = {}  # schema id → its schemaType when not AVRO (JSON, PROTOBUF: held, never checked)
        self.references: dict[int, list[dict[str, Any]]] = {}  # schema id → its references (Protobuf imports)
        self.subjects: dict[str, _Subject] = {}
        self.level = level
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request, for tests that count them

    def _subject(self, name: str) -> _Subject:
        found = self.subjects.get(name)
        if found is None or not found.versions:
            raise RegistryError(404, 40401, f"Subject '{name}' not found.")
        return found

    def _version(self, name: str, version: str) -> tuple[int, int]:
        """(version number, schema id) of `version` (a number, `latest` or -1)."""
        versions = self._subject(name).versions
        if version in ("latest", "-1"):
            return len(versions), versions[-1]
        if not re.fullmatch(r"[0-9]+", version):
            raise RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id.")
        n = int(version)
        if not 1 <= n <= len(versions):
            raise RegistryError(404, 40402, f"Version {n} not found.")
        return n, versions[n - 1]

    def level_of(self, name: str) -> str:
        subject = self.subjects.get(name)
        return subject.level if subject is not None and subject.level else self.level

    def problems(self, name: str, text: str, against: list[int]) -> list[str]:
        """What makes `text` incompatible, under the subject's level, with the schemas `against` (ids, oldest first)."""
        level = self.level_of(name)
        if level == "NONE" or not against:
            return []
        checked = against if level.endswith("_TRANSITIVE") else against[-1:]
        found: list[str] = []
        for schema_id in checked:
            old = self.schemas[schema_id - 1]
            if level.startswith(("BACKWARD", "FULL")):
                found += _readable(text, old)  # the new schema reads what the old one wrote
            if level.startswith(("FORWARD", "FULL")):
                found += _readable(old, text)  # the old schema reads what the new one writes
        return found

    def register(self, name: str, text: str, kind: str = "AVRO", references: list[dict[str, Any]] | None = None) -> int:
        _parse(text, kind)
        references = references or []
        key = _key(kind, text, references)
        with self.lock:
            self._check_references(references)
            subject = self.subjects.setdefault(name, _Subject())
            live = self.live_ids(name)
            known = self.by_text.get(key)
            if known is not None and known in live:
                return known  # the same schema again: its id, no new version
            problems = self.problems(name, text, live) if kind == "AVRO" else []
            if problems:
                raise RegistryError(409, 409, f"Schema being registered is incompatible with an earlier schema for subject "
                                              f"\"{name}\", details: {problems}")
            if known is None:
                self.schemas.append(text)
                known = self.by_text[key] = len(self.schemas)
                if kind != "AVRO":
                    self.kinds[known] = kind
                if references:
                    self.references[known] = references
            subject.versions.append(known)
            return known

    def live_ids(self, name: str) -> list[int]:
        """The schema ids of the subject's versions a registration is judged against (all of them here; a registry
        that deletes versions leaves the deleted out)."""
        subject = self.subjects.get(name)
        return list(subject.versions) if subject else []

    def _check_references(self, references: list[dict[str, Any]]) -> None:
        """Each reference names a subject's version that exists (Confluent: 422, error 42201, otherwise)."""
        for ref in references:
            try:
                self._version(str(ref.get("subject")), str(ref.get("version")))
            except RegistryError:
                raise RegistryError(422, 42201, f"Invalid schema: reference {ref} names no registered version") from None

    def lookup(self, name: str, text: str, kind: str = "AVRO", references: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        with self.lock:
            subject = self._subject(name)
            known = self.by_text.get(_key(kind, text, references or []))
            if known is None or known not in subject.versions:
                raise RegistryError(404, 40403, "Schema not found")
            return self._registered(name, subject.versions.index(known) + 1, known)

    def _registered(self, name: str, version: int, schema_id: int) -> dict[str, Any]:
        return {"subject": name, "version": version, "id": schema_id, **self._schema(schema_id)}

    def _schema(self, schema_id: int) -> dict[str, Any]:
        """A schema as Confluent answers it: `schemaType` only when it is not AVRO, `references` only when it has some."""
        kind, references = self.kinds.get(schema_id), self.references.get(schema_id)
        return {"schema": self.schemas[schema_id - 1], **({"schemaType": kind} if kind else {}),
                **({"references": references} if references else {})}

    def schema(self, schema_id: int) -> dict[str, Any]:
        with self.lock:
            if not 1 <= schema_id <= len(self.schemas):
                raise RegistryError(404, 40403, "Schema not found")
            return self._schema(schema_id)

    def version(self, name: str, version: str) -> dict[str, Any]:
        with self.lock:
            return self._registered(name, *self._version(name, version))

    def versions(self, name: str) -> list[int]:
        with self.lock:
            return list(range(1, len(self._subject(name).versions) + 1))

    def compatible(self, name: str, version: str, text: str, kind: str = "AVRO",
                   references: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        _parse(text, kind)
        if kind != "AVRO":
            return {"is_compatible": True, "messages": []}  # JSON Schemas and Protobuf: held, not checked (Confluent's rules not reimplemented)
        with self.lock:
            _, schema_id = self._version(name, version)
            saved, self.subjects[name].level = self.subjects[name].level, self.level_of(name).replace("_TRANSITIVE", "")
            try:
                problems = self.problems(name, text, [schema_id])
            finally:
                self.subjects[name].level = saved
        return {"is_compatible": not problems, "messages": problems}

    def config(self, name: str | None) -> dict[str, Any]:
        with self.lock:
            if name is None:
                return {"compatibilityLevel": self.level}
            subject = self.subjects.get(name)
            if subject is None or subject.level is None:
                raise RegistryError(404, 40408, f"Subject '{name}' does not have subject-level compatibility configured")
            return {"compatibilityLevel": subject.level}

    def set_config(self, name: str | None, level: Any) -> dict[str, Any]:
        if level not in LEVELS:
            raise RegistryError(422, 42203, f"Invalid compatibility level. Valid values are {', '.join(LEVELS)}")
        with self.lock:
            if name is None:
                self.level = level
            else:
                self.subjects.setdefault(name, _Subject()).level = level
        return {"compatibility": level}


def _schema_of(body: Any) -> tuple[str, str, list[dict[str, Any]]]:
    """(schema text, schemaType, references) of a request body."""
    if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
        raise RegistryError(422, 42201, "Invalid schema: the request body has no \"schema\" string")
    kind = body.get("schemaType", "AVRO")
    if kind not in ("AVRO", "JSON", "PROTOBUF"):
        raise RegistryError(422, 42201, f"Invalid schema: this test registry holds AVRO, JSON and PROTOBUF schemas only, "
                                        f"not {kind}")
    references = body.get("references") or []
    if references and kind != "PROTOBUF":
        raise RegistryError(422, 42201, "Invalid schema: this test registry resolves references of Protobuf schemas only")
    return body["schema"], kind, [{"name": r.get("name"), "subject": r.get("subject"), "version": r.get("version")}
                                  for r in references]


Route = tuple[str, "re.Pattern[str]", Callable[..., Any]]


def _routes(state: SchemaRegistryState) -> list[Route]:
    s = r"([^/]+)"
    return [
        ("POST", re.compile(rf"/subjects/{s}/versions"), lambda b, subj: {"id": state.register(subj, *_schema_of(b))}),
        ("POST", re.compile(rf"/subjects/{s}"), lambda b, subj: state.lookup(subj, *_schema_of(b))),
        ("GET", re.compile(r"/schemas/ids/([0-9]+)"), lambda b, i: state.schema(int(i))),
        ("GET", re.compile(r"/subjects"), lambda b: sorted(n for n, x in state.subjects.items() if x.versions)),
        ("GET", re.compile(rf"/subjects/{s}/versions"), lambda b, subj: state.versions(subj)),
        ("GET", re.compile(rf"/subjects/{s}/versions/{s}"), lambda b, subj, v: state.version(subj, v)),
        ("POST", re.compile(rf"/compatibility/subjects/{s}/versions/{s}"),
         lambda b, subj, v: state.compatible(subj, v, *_schema_of(b))),
        ("GET", re.compile(r"/config"), lambda b: state.config(None)),
        ("PUT", re.compile(r"/config"), lambda b: state.set_config(None, (b or {}).get("compatibility"))),
        ("GET", re.compile(rf"/config/{s}"), lambda b, subj: state.config(subj)),
        ("PUT", re.compile(rf"/config/{s}"), lambda b, subj: state.set_config(subj, (b or {}).get("compatibility"))),
    ]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the base class's parameter name
        pass  # quiet: tests read the registry's state, not an access log

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        registry = self.server.registry
        registry.state.requests.append((method, path))
        try:
            if registry.auth is not None and self.headers.get("Authorization") != registry.expected_authorization:
                raise RegistryError(401, 401, "Unauthorized")
            body = json.loads(raw) if raw else None
            for verb, pattern, handler in registry.routes:
                match = pattern.fullmatch(path)
                if verb == method and match:
                    self._answer(200, handler(body, *[unquote(g) for g in match.groups()]))
                    return
            raise RegistryError(404, 404, f"HTTP 404 Not Found: {method} {path}")
        except RegistryError as exc:
            self._answer(exc.status, {"error_code": exc.code, "message": exc.message})
        except json.JSONDecodeError as exc:
            self._answer(400, {"error_code": 400, "message": f"Unrecognized JSON: {exc}"})

    def do_GET(self) -> None:  # http.server's method names
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: LocalSchemaRegistry


class LocalSchemaRegistry:
    """The registry on a free port of 127.0.0.1, served from a thread. A context manager; `stop()` may be called again."""

    def __init__(self, level: str = "BACKWARD", auth: tuple[str, str] | None = None) -> None:
        self.state = SchemaRegistryState(level)
        self.routes = _routes(self.state)
        self.auth = auth
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode() if auth else ""
        self.expected_authorization = f"Basic {token}"
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("registry not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalSchemaRegistry:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.registry = self
        self._server, self.port = server, server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="schema-registry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LocalSchemaRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
