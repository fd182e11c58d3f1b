# Which function consumes which topic, and how each function is sized: local.consumers and
# local.functions are generated into registry.tf from shared/runtime/stages.py (each Stage's
# consumers and its Function entries); this file explains their fields and derives the rest.
#
# A gen2 function has one trigger, so a stage that consumes two topics (indexer,
# transformer) is deployed once per topic: same source, same entry point (the stage's
# target in main.py picks its consumer by the message's `type` attribute).

locals {
  # local.functions (registry.tf): every Cloud Function, keyed by its short name (deployed as
  # "ragbus-<key>"), its values from the stage's Function entries in shared/runtime/stages.py:
  #   entry_point  the target in the root main.py
  #   trigger      pubsub (a push subscription in pubsub.tf), http, or an Eventarc GCS event
  #   publishes    topics its service account may publish to (topic-level IAM)
  #   blobs        access to the blob bucket (raw and clean text): none | read | write
  #   documents    access to the documents bucket (uploads): none | read
  #   model        calls the language model: Gemini on Vertex AI (project-level
  #                roles/aiplatform.user), or the openai server (its key secret, if any)
  #   embeds       embeds text: in process (var.embedder = "local", the packaged ONNX
  #                model) or on Vertex AI (var.embedder = "genai", roles/aiplatform.user)
  #   index        reads or writes the chunk index (roles/aiplatform.user when
  #                local.index_backend is "vertex": Vector Search upserts, removals, queries)
  #   memory/cpu/timeout/max_instances/concurrency: sizing. The indexer, retriever,
  #   synthesizer and gateway load the ONNX embedder (~0.5 GiB with its runtime), hence 2Gi.
  #   max_instances x concurrency is how many messages a function runs at once; a push
  #   beyond that waits up to 10 s and gets 429, which Pub/Sub retries (pubsub.tf). Each
  #   function runs `concurrency` gunicorn threads (THREADS, functions.tf), as Cloud Run
  #   functions' concurrency page recommends for Python.
  #   The model-calling functions' timeouts leave room, with llm_provider = "openai", for a
  #   cold start's GET /models check and one call, each up to openai_timeout_s, plus the
  #   clamped backoffs between retries of fast failures (functions.tf's precondition).
  #   A push subscription's ack deadline equals its function's timeout (Pub/Sub allows at
  #   most 600 s), so Pub/Sub never redelivers a message that is still being handled.

  # Pub/Sub's wait between deliveries of a message its function failed or refused with 429
  # (the retry policy: exponential between minimum and maximum, each at most 600 s,
  # cloud.google.com/pubsub/docs/handling-failures). Ingestion has no one waiting: Pub/Sub's
  # defaults, 10 s .. 600 s, spread a burst's retries over hours. The query loop has a
  # question waiting (RAGBUS_QUERY_TIMEOUT_S, 60 s by default): 1 s .. 60 s, so a refused hop
  # is retried while the answer is still wanted. With max_delivery_attempts = 100 either
  # leaves a refused message far longer than a burst takes to drain (docs/google-cloud.md: Delivery under load).
  retry_backoff = {
    ingestion = { minimum = "10s", maximum = "600s" }
    query     = { minimum = "1s", maximum = "60s" }
  }
  consumer_backoff = { for name, c in local.consumers : name => contains(local.query_stages, c.stage) ? local.retry_backoff.query : local.retry_backoff.ingestion }

  pubsub_functions = { for name, f in local.functions : name => f if f.trigger == "pubsub" }
  gcs_functions    = { for name, f in local.functions : name => f if startswith(f.trigger, "google.cloud.storage.") }

  vertex_location = var.vertex_location != "" ? var.vertex_location : var.region
}
