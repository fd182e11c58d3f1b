"""Small hand-written fakes of the ports, for unit tests."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.contract.messages import Message, encode
from shared.contract.ports import Doc


class InMemoryStateStore:
    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Doc]] = {}
        self._lock = threading.RLock()

    def _col(self, collection: str) -> dict[str, Doc]:
        return self.docs.setdefault(collection, {})

    def get(self, collection: str, key: str) -> Doc | None:
        with self._lock:
            doc = self._col(collection).get(key)
            return copy.deepcopy(doc)

    def get_many(self, collection: str, keys) -> dict[str, Doc]:
        with self._lock:
            col = self._col(collection)
            return {key: copy.deepcopy(col[key]) for key in keys if key in col}

    def create(self, collection: str, key: str, doc: Doc) -> bool:
        with self._lock:
            col = self._col(collection)
            if key in col:
                return False
            col[key] = copy.deepcopy(doc)
            return True

    def put(self, collection: str, key: str, doc: Doc) -> None:
        with self._lock:
            self._col(collection)[key] = copy.deepcopy(doc)

    def delete(self, collection: str, key: str) -> bool:
        with self._lock:
            return self._col(collection).pop(key, None) is not None

    def update(self, collection: str, key: str, fn: Callable[[Doc | None], Doc | None]) -> Doc | None:
        with self._lock:
            current = copy.deepcopy(self._col(collection).get(key))
            new = fn(current)
            if new is None:
                return current
            self._col(collection)[key] = copy.deepcopy(new)
            return copy.deepcopy(new)

    def list(self, collection: str, where: Mapping[str, Any] | None = None, limit: int | None = None) -> list[Doc]:
        with self._lock:
            out = []
            for key in sorted(self._col(collection)):
                doc = self._col(collection)[key]
                if all(_field(doc, f) == v for f, v in (where or {}).items()):
                    out.append(copy.deepcopy(doc))
            return out[:limit] if limit is not None else out

    def count(self, collection: str, where: Mapping[str, Any] | None = None) -> int:
        return len(self.list(collection, where))


def _field(doc: Doc, path: str) -> Any:
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


class RecordingPublisher:
    """Keeps every published message; encodes each so schema errors show up in unit tests."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.attributes: list[dict[str, str]] = []

    def publish(self, message: Message, attributes: Mapping[str, str] | None = None) -> str:
        _, attrs = encode(message)
        attrs.update(attributes or {})
        self.messages.append(message)
        self.attributes.append(attrs)
        return str(len(self.messages))

    def of_type(self, cls: type[Message]) -> list[Message]:
        return [m for m in self.messages if isinstance(m, cls)]


class InMemoryBlobStore:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        self.blobs[key] = bytes(data)
        return "mem:" + key

    def get(self, ref: str) -> bytes:
        try:
            return self.blobs[ref.removeprefix("mem:")]
        except KeyError:
            raise KeyError(f"no blob at {ref!r}") from None

    def delete(self, ref: str) -> None:
        self.blobs.pop(ref.removeprefix("mem:"), None)


class FakeClock:
    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        return self.current

    def monotonic(self) -> float:
        return self._mono

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)
        self._mono += seconds
