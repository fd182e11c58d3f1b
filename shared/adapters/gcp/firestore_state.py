"""The StateStore port on Firestore (native mode).

Behaves like :class:`shared.adapters.local.state.SqliteStateStore` (the contract
test in ``tests/integration/test_state_store_contract.py`` runs one suite
against both):

- ``create`` is ``DocumentReference.create``: the server refuses it when the
  document exists, which makes it the atomic create-if-absent processed ids need.
- ``update`` runs ``fn`` in a Firestore transaction (reads lock the document on
  the server, a conflicting commit is retried), so ``fn`` must be pure.
- ``list`` / ``count`` are equality queries (dotted paths reach nested fields)
  and the server-side count aggregation: no counter lives in a shared
  document, because one document takes about one write a second.

Keys are stored as document ids through an order-preserving, reversible
encoding (``/`` is not allowed in an id), and the original key is kept in the
field ``_ragbus_key`` (removed again when a document is read).

Firestore-specific limits callers should know: a document is at most 1 MiB
(:func:`document_size` computes it as Firestore does; a write over the limit is
refused here with a :class:`PermanentError` naming the document, instead of the
server's opaque INVALID_ARGUMENT), arrays may not directly contain arrays, map
keys may not be empty.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from shared.adapters.gcp.calls import FIRESTORE_TRANSIENT, calling
from shared.contract.errors import ConfigError, PermanentError
from shared.contract.ports import Doc

log = logging.getLogger("ragbus.firestore")

#: Field holding the caller's key, so a document can be found by it in the console.
KEY_FIELD = "_ragbus_key"
# Top-level fields kept as Firestore timestamps (the TTL policy on queries.expire_at in infra/).
TIMESTAMP_FIELDS = ("expire_at",)

_RESERVED_ID = re.compile(r"^__.*__$")
_MAX_ID_BYTES = 1500
#: Documents asked for in one get_all (BatchGetDocuments) call.
GET_ALL_BATCH = 300
#: Firestore's maximum document size (1 MiB), as :func:`document_size` counts it.
MAX_DOCUMENT_BYTES = 1_048_576


def _string_size(value: str) -> int:
    return len(value.encode("utf-8")) + 1


def _value_size(value: Any) -> int:
    # https://cloud.google.com/firestore/docs/storage-size ("Field value size")
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, int | float | datetime):
        return 8
    if isinstance(value, str):
        return _string_size(value)
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, Mapping):
        return sum(_string_size(str(k)) + _value_size(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_value_size(v) for v in value)
    return _string_size(str(value))


def document_size(collection_id: str, doc_id: str, data: Mapping[str, Any]) -> int:
    """The stored size of a top-level document, by Firestore's documented rules.

    Document name: each collection and document id (UTF-8 bytes + 1) + 16; each
    field: its name (UTF-8 bytes + 1) + its value (string UTF-8 bytes + 1,
    number/timestamp 8, boolean/null 1, map: keys + values, array: values); + 32.
    """
    name = _string_size(collection_id) + _string_size(doc_id) + 16
    return name + _value_size(data) + 32


def encode_key(key: str) -> str:
    """A valid Firestore document id for ``key``; distinct keys give distinct ids.

    ``.`` becomes ``.-`` and ``/`` becomes ``._``. Every id keeps its key's sort
    order (Firestore orders ids by UTF-8 bytes; ``-`` < ``_``, and nothing sorts
    between ``.`` and ``/``), so ``list`` returns documents in key order like
    the local store. No id is ``.`` or ``..`` (a ``.`` is always followed by
    ``-`` or ``_``); an id of the reserved form ``__x__`` gets the suffix ``.~``,
    which no other encoding produces.
    """
    if not key:
        raise ValueError("a state key must not be empty")
    encoded = key.replace(".", ".-").replace("/", "._")
    if _RESERVED_ID.match(encoded):
        encoded += ".~"
    if len(encoded.encode("utf-8")) > _MAX_ID_BYTES:
        raise ValueError(
            f"state key {key[:80]!r}... encodes to more than {_MAX_ID_BYTES} bytes; "
            "derive a shorter key (a hash)"
        )
    return encoded


def decode_key(doc_id: str) -> str:
    """The key :func:`encode_key` turned into ``doc_id``."""
    doc_id = doc_id.removesuffix(".~")
    out, i = [], 0
    while i < len(doc_id):
        ch = doc_id[i]
        if ch == ".":
            out.append("." if doc_id[i + 1] == "-" else "/")
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _field(doc: Doc, path: str) -> Any:
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


class FirestoreStateStore:
    """Collections of JSON documents in Firestore, for the gcp runtime.

    Pass a ready ``firestore.Client``, or ``project`` (and ``database``) to have
    one built on first use; with ``FIRESTORE_EMULATOR_HOST`` set it talks to the
    emulator. ``namespace`` prefixes every collection name (``<ns>_<name>``),
    which lets tests and several deployments share one database.
    ``max_attempts`` bounds the commits of one ``update`` under contention.
    """

    def __init__(
        self,
        client: firestore.Client | None = None,
        *,
        project: str | None = None,
        database: str | None = None,
        namespace: str = "",
        max_attempts: int = 10,
    ) -> None:
        if client is None and not project:
            raise ConfigError(
                "FirestoreStateStore needs a client or a project id (GOOGLE_CLOUD_PROJECT)"
            )
        if "/" in namespace:
            raise ValueError(f"namespace {namespace!r} must not contain '/'")
        self._client = client
        self._project = project
        self._database = database
        self.namespace = namespace
        self.max_attempts = max_attempts
        self._lock = threading.Lock()

    @property
    def client(self) -> firestore.Client:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    kwargs: dict[str, Any] = {"project": self._project}
                    if self._database:
                        kwargs["database"] = self._database
                    if os.environ.get("FIRESTORE_EMULATOR_HOST"):
                        from google.auth.credentials import AnonymousCredentials

                        kwargs["credentials"] = AnonymousCredentials()
                    self._client = firestore.Client(**kwargs)
        return self._client

    # -------------------------------------------------------------- paths

    def collection_id(self, collection: str) -> str:
        if not collection or "/" in collection:
            raise ValueError(f"collection name {collection!r} must be non-empty and without '/'")
        return f"{self.namespace}_{collection}" if self.namespace else collection

    def _ref(self, collection: str, key: str) -> firestore.DocumentReference:
        return self.client.collection(self.collection_id(collection)).document(encode_key(key))

    def _stored(self, collection: str, key: str, doc: Doc) -> Doc:
        if KEY_FIELD in doc:
            raise ValueError(f"field {KEY_FIELD!r} is reserved by the Firestore state store")
        stored = {**doc, KEY_FIELD: key}
        for field in TIMESTAMP_FIELDS:
            # Firestore's TTL policy reads timestamps only; ports speak ISO strings.
            if isinstance(stored.get(field), str):
                stored[field] = datetime.fromisoformat(stored[field])
        size = document_size(self.collection_id(collection), encode_key(key), stored)
        if size > MAX_DOCUMENT_BYTES:
            raise PermanentError(
                f"Firestore document {collection}/{key} would be {size} bytes, over Firestore's "
                f"{MAX_DOCUMENT_BYTES}-byte limit; not written"
            )
        return stored

    @staticmethod
    def _loaded(data: dict[str, Any] | None) -> Doc | None:
        if data is None:
            return None
        data.pop(KEY_FIELD, None)
        for field in TIMESTAMP_FIELDS:
            if isinstance(data.get(field), datetime):
                data[field] = data[field].isoformat()
        return data

    def _calling(self, what: str) -> AbstractContextManager[None]:
        return calling("Firestore", what, transient=FIRESTORE_TRANSIENT)

    # ---------------------------------------------------------- documents

    def get(self, collection: str, key: str) -> Doc | None:
        with self._calling(f"get {collection}/{key}"):
            snapshot = self._ref(collection, key).get()
        return self._loaded(snapshot.to_dict()) if snapshot.exists else None

    def get_many(self, collection: str, keys: Sequence[str]) -> dict[str, Doc]:
        """One ``BatchGetDocuments`` call per 300 keys (``Client.get_all``), not one read per key."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Doc] = {}
        for start in range(0, len(wanted), GET_ALL_BATCH):
            refs = [self._ref(collection, key) for key in wanted[start : start + GET_ALL_BATCH]]
            with self._calling(f"get_all {collection} ({len(refs)} documents)"):
                snapshots = list(self.client.get_all(refs))
            for snapshot in snapshots:
                if snapshot.exists:
                    found[decode_key(snapshot.id)] = self._loaded(snapshot.to_dict())
        return found

    def create(self, collection: str, key: str, doc: Doc) -> bool:
        with self._calling(f"create {collection}/{key}"):
            try:
                self._ref(collection, key).create(self._stored(collection, key, doc))
            except gexc.AlreadyExists:
                return False
        return True

    def put(self, collection: str, key: str, doc: Doc) -> None:
        with self._calling(f"put {collection}/{key}"):
            self._ref(collection, key).set(self._stored(collection, key, doc))

    def delete(self, collection: str, key: str) -> bool:
        # The exists precondition makes the server say whether there was a document,
        # in the same single write.
        with self._calling(f"delete {collection}/{key}"):
            try:
                self._ref(collection, key).delete(option=self.client.write_option(exists=True))
            except gexc.NotFound:
                return False
        return True

    def update(
        self, collection: str, key: str, fn: Callable[[Doc | None], Doc | None]
    ) -> Doc | None:
        ref = self._ref(collection, key)

        @firestore.transactional
        def read_modify_write(transaction: firestore.Transaction) -> Doc | None:
            snapshot = ref.get(transaction=transaction)
            current = self._loaded(snapshot.to_dict()) if snapshot.exists else None
            # fn gets a copy: it may run again on a retry and must not see its own edits.
            new = fn(copy.deepcopy(current))
            if new is None:
                return current
            transaction.set(ref, self._stored(collection, key, new))
            return copy.deepcopy(new)

        with calling("Firestore", f"update {collection}/{key}", transient=FIRESTORE_TRANSIENT,
                     transaction_attempts=self.max_attempts):
            return read_modify_write(self.client.transaction(max_attempts=self.max_attempts))

    # ------------------------------------------------------------ queries

    def _query(
        self, collection: str, where: Mapping[str, Any] | None
    ) -> tuple[Any, dict[str, None]]:
        """The server-side query, and the ``None`` filters left to check here.

        Firestore's ``== null`` matches only fields stored as null, while the
        local store also matches missing fields; those filters run on the
        documents the rest of the query returns.
        """
        query: Any = self.client.collection(self.collection_id(collection))
        local: dict[str, None] = {}
        for field_path, value in (where or {}).items():
            if value is None:
                local[field_path] = None
            else:
                query = query.where(filter=FieldFilter(field_path, "==", value))
        return query, local

    def list(
        self, collection: str, where: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> list[Doc]:
        query, local = self._query(collection, where)
        if limit is not None and not local:
            query = query.limit(int(limit))
        out: list[Doc] = []
        with self._calling(f"list {collection}"):
            # Without an order_by Firestore returns documents in id order, which
            # encode_key keeps equal to key order.
            for snapshot in query.stream():
                doc = self._loaded(snapshot.to_dict())
                assert doc is not None
                if all(_field(doc, f) is None for f in local):
                    out.append(doc)
                    if limit is not None and len(out) >= limit:
                        break
        return out

    def count(self, collection: str, where: Mapping[str, Any] | None = None) -> int:
        query, local = self._query(collection, where)
        if local:
            return len(self.list(collection, where))
        with self._calling(f"count {collection}"):
            results = query.count(alias="n").get()
        return int(results[0][0].value)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
