"""Cloud Function entry point of the indexer (``functions-framework --target=indexer``),
pushed both ``document-cleaned`` and ``document-deleted``.

Thin on purpose: :func:`shared.runtime.functions.pubsub_entry_point` decodes the
event, picks the subscription by the message's type, builds this instance's
dependencies for the configured runtime once (the embedder and index load once
per instance), calls :mod:`services.indexer.handler` and maps the outcome onto
Pub/Sub delivery (raise to be redelivered, record and return to drop).
"""

import functions_framework

from shared.runtime.functions import pubsub_entry_point

_handle = pubsub_entry_point("indexer")


@functions_framework.cloud_event
def indexer(event) -> None:
    _handle(event)
