"""Cloud Function entry point of the indexer (``functions-framework --target=indexer``):
both ``document-cleaned`` and ``document-deleted`` arrive here.

Thin on purpose: :func:`shared.runtime.functions.pubsub_entry_point` decodes the
event, continues the trace, calls :mod:`services.indexer.handler` and maps the
outcome onto Pub/Sub delivery (raise to be redelivered, record and return to drop).
"""

import functions_framework

from shared.runtime.functions import pubsub_entry_point

_handle = pubsub_entry_point("indexer")


@functions_framework.cloud_event
def indexer(event) -> None:
    _handle(event)
