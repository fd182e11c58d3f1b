"""Cloud Functions entry point of the transformer (Pub/Sub push as a CloudEvent).

Thin on purpose: :func:`shared.runtime.functions.pubsub_entry_point` decodes the
event, continues the trace, calls :mod:`services.transformer.handler` and maps the
outcome onto Pub/Sub delivery (raise to be redelivered, record and return to drop).
"""

import functions_framework

from shared.runtime.functions import pubsub_entry_point

_handle = pubsub_entry_point("transformer")


@functions_framework.cloud_event
def transformer(event) -> None:
    _handle(event)
