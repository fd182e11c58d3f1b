"""Cloud Function entry point of the cleaner (``functions-framework --target=cleaner``).

Thin on purpose: :func:`shared.runtime.functions.pubsub_entry_point` decodes the
event, continues the trace, calls :mod:`services.cleaner.handler` and maps the
outcome onto Pub/Sub delivery (raise to be redelivered, record and return to drop).
"""

import functions_framework

from shared.runtime.functions import pubsub_entry_point

_handle = pubsub_entry_point("cleaner")


@functions_framework.cloud_event
def cleaner(event) -> None:
    _handle(event)
