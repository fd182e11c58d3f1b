"""Cloud Storage object events as ingestion messages (the cloud twin of ``ragbus ingest``).

A finalized object becomes ``DocumentFetched`` whose raw reference is the
object itself (``gs://bucket/name``: claim check, nothing copied); a deleted
object becomes ``DocumentDeleted``. An object named as a document type followed
by ``.gz`` (``doc.md.gz``) is that document gzip-compressed: the cleaner
decompresses it, within the cap ``ragbus ingest`` sets. The document id is
derived from the object's ``gs://`` path, so re-uploads replace the same document. Overwriting
an object finalizes a new generation and then deletes the old one; the delete
of a generation that is no longer the one we indexed is ignored, so an
overwrite never removes the fresh document.
"""

from __future__ import annotations

import base64
import binascii
import logging
from pathlib import PurePosixPath
from typing import Any

from shared.contract import state_collections
from shared.contract.errors import InvalidInput
from shared.contract.ids import file_document_id
from shared.contract.messages import DocumentDeleted, DocumentFetched
from shared.contract.ports import Clock, Publisher, StateStore
from shared.formats.gzipped import COMPRESSED, compressed_name
from shared.formats.registry import by_suffix, suffix_list
from shared.ingest import processed_items
from shared.ingest.files import DEFAULT_MAX_BYTES
from shared.ingest.step import Content, Item, announce, retract

log = logging.getLogger("ragbus.gcs_ingest")


def _object(data: dict[str, Any]) -> tuple[str, str, str]:
    bucket, name = data.get("bucket"), data.get("name")
    if not bucket or not name:
        raise InvalidInput(f"storage event without bucket/name: {sorted(data)}")
    return bucket, name, f"gs://{bucket}/{name}"


def _content_hash(data: dict[str, Any]) -> str:
    md5 = data.get("md5Hash")
    if md5:
        try:
            return base64.b64decode(md5).hex()
        except (binascii.Error, ValueError):
            pass
    # composite objects have no md5; the generation changes on every write
    return f"gen-{data.get('generation', '')}-{data.get('crc32c', '')}"


def on_object_finalized(
    data: dict[str, Any], *, state: StateStore, publisher: Publisher, clock: Clock
) -> DocumentFetched | None:
    """Announce a new or changed object; unchanged re-deliveries publish nothing."""
    bucket, name, uri = _object(data)
    # doc.md.gz is doc.md gzip-compressed, as `ragbus ingest` reads a file so named: the cleaner decompresses it
    inner, compressed = compressed_name(name)
    suffix = PurePosixPath(inner).suffix.lower()
    kind = by_suffix(suffix)
    if kind is None or kind.refused:
        log.info("ignoring %s: %s", uri, kind.refused if kind is not None else
                 f"unsupported suffix {suffix + COMPRESSED if compressed else suffix!r} (supported: {suffix_list()}, "
                 f"each also gzip-compressed ({COMPRESSED}))")
        return None
    size = str(data.get("size") or "")
    if compressed and size.isdigit() and int(size) > DEFAULT_MAX_BYTES:  # never downloaded: the cleaner refuses it
        log.warning("ignoring %s: it is %s bytes, over the %d-byte cap for one document", uri, size, DEFAULT_MAX_BYTES)
        return None
    content_type = kind.media_type
    generation = str(data.get("generation", ""))
    item = Item(
        document_id=file_document_id(uri),
        source="gcs",
        origin=f"gs://{bucket}",
        guid=uri,
        item_hash=_content_hash(data),
        ledger={"path": uri, "origin": f"gs://{bucket}", "generation": generation},
        trace={"uri": uri},
        trace_name="gcs object",
    )
    # Claim check: the object itself is the raw reference, nothing is copied.
    content = Content(url=uri, content_type=content_type, raw_ref=uri, fallback_title=PurePosixPath(inner).stem,
                      published=data.get("timeCreated"), ledger={"generation": generation})
    # a replayed event of a generation not newer than one deleted is refused: deletes win
    return announce(item, lambda: content, state=state, publisher=publisher, clock=clock,
                    generation=processed_items.generation_number(generation)).message



def on_object_deleted(
    data: dict[str, Any], *, state: StateStore, publisher: Publisher, clock: Clock
) -> DocumentDeleted | None:
    """Remove the document of a deleted object, unless a newer generation replaced it."""
    _, _, uri = _object(data)
    document_id = file_document_id(uri)
    record = state.get(state_collections.PROCESSED_ITEMS, document_id)
    generation = str(data.get("generation", ""))
    current = processed_items.generation_number((record or {}).get("generation"))
    deleted = processed_items.generation_number(generation)
    if current is not None and deleted is not None and current > deleted:
        log.info("ignoring delete of %s generation %s: generation %s is current", uri, generation,
                 record["generation"])  # type: ignore[index]
        return None
    return retract(document_id, "object deleted", state=state, publisher=publisher, clock=clock,
                   generation=generation or None)
