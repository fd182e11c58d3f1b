"""Cloud Functions entry point of the synthesizer (Pub/Sub push as a CloudEvent).

Thin on purpose: :func:`shared.runtime.functions.pubsub_entry_point` decodes the
event, continues the trace, calls :mod:`services.synthesizer.handler` and maps the
outcome onto Pub/Sub delivery (raise to be redelivered, record and return to drop).
"""

import functions_framework

from shared.runtime.functions import pubsub_entry_point

_handle = pubsub_entry_point("synthesizer")


@functions_framework.cloud_event
def synthesizer(event) -> None:
    _handle(event)
