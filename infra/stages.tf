# Which function consumes which topic, and how each function is sized.
#
# local.consumers (registry.tf, generated from shared.runtime.stages.CONSUMERS): one entry
# per (stage, topic), keyed by the subscription name the code uses (<stage>.<topic>).
# tests/unit/test_infra.py checks that each of its functions is declared here.
#
# A gen2 function has one trigger, so a stage that consumes two topics (indexer,
# transformer) is deployed once per topic: same source, same entry point (the stage's
# target in main.py picks its consumer by the message's `type` attribute).

locals {
  # Every Cloud Function, keyed by its short name (deployed as "ragbus-<key>").
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
  #                var.index_backend = "vertex": Vector Search upserts, removals, queries)
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
  functions = {
    "feed-poller" = {
      stage = "feed_poller", entry_point = "feed_poller", trigger = "pubsub"
      publishes = ["document-fetched", "document-deleted"], blobs = "write", documents = "none", model = false, embeds = false, index = false
      # Polls every registered feed with 10 s fetch timeouts and retries: give it time.
      memory = "1Gi", cpu = "1", timeout = 540, max_instances = 3, concurrency = 1
    }
    "cleaner" = {
      stage = "cleaner", entry_point = "cleaner", trigger = "pubsub"
      # Reads raw HTML from the blob bucket, or the uploaded object for GCS-sourced documents.
      publishes = ["document-cleaned"], blobs = "write", documents = "read", model = false, embeds = false, index = false
      memory = "1Gi", cpu = "1", timeout = 120, max_instances = 10, concurrency = 4
    }
    "indexer-document-cleaned" = {
      stage = "indexer", entry_point = "indexer", trigger = "pubsub"
      publishes = ["document-indexed"], blobs = "read", documents = "none", model = false, embeds = true, index = true
      memory = "2Gi", cpu = "1", timeout = 300, max_instances = 5, concurrency = 2
    }
    "indexer-document-deleted" = {
      # Deletes chunks only: the embedder is built lazily and never loaded here.
      stage = "indexer", entry_point = "indexer", trigger = "pubsub"
      publishes = ["document-indexed"], blobs = "none", documents = "none", model = false, embeds = false, index = true
      memory = "512Mi", cpu = "1", timeout = 120, max_instances = 3, concurrency = 4
    }
    "transformer-query-submitted" = {
      stage = "transformer", entry_point = "transformer", trigger = "pubsub"
      publishes = ["query-transformed"], blobs = "none", documents = "none", model = true, embeds = false, index = false
      memory = "512Mi", cpu = "1", timeout = 150, max_instances = 20, concurrency = 8
    }
    "transformer-query-graded" = {
      stage = "transformer", entry_point = "transformer", trigger = "pubsub"
      publishes = ["query-transformed"], blobs = "none", documents = "none", model = true, embeds = false, index = false
      memory = "512Mi", cpu = "1", timeout = 150, max_instances = 20, concurrency = 8
    }
    "retriever" = {
      stage = "retriever", entry_point = "retriever", trigger = "pubsub"
      publishes = ["contexts-retrieved"], blobs = "none", documents = "none", model = false, embeds = true, index = true
      memory = "2Gi", cpu = "1", timeout = 120, max_instances = 10, concurrency = 4
    }
    "grader" = {
      stage = "grader", entry_point = "grader", trigger = "pubsub"
      publishes = ["query-graded"], blobs = "none", documents = "none", model = true, embeds = false, index = false
      memory = "512Mi", cpu = "1", timeout = 150, max_instances = 20, concurrency = 8
    }
    "synthesizer" = {
      # Loads the embedder for the extractive answer when the model's answer is unusable.
      stage = "synthesizer", entry_point = "synthesizer", trigger = "pubsub"
      publishes = ["answer-ready"], blobs = "none", documents = "none", model = true, embeds = true, index = false
      memory = "2Gi", cpu = "1", timeout = 180, max_instances = 10, concurrency = 4
    }
    "gateway" = {
      # HTTP: REST, event stream, MCP and the web page; /search embeds the query.
      stage = "gateway", entry_point = "gateway", trigger = "http"
      publishes = ["query-submitted", "feed-poll-requested"], blobs = "none", documents = "none", model = false, embeds = true, index = true
      memory = "2Gi", cpu = "1", timeout = 300, max_instances = 10, concurrency = 40
    }
    "dead-letters" = {
      # Records what Pub/Sub dead-lettered (a push subscription on every dead-letter
      # topic, pubsub.tf) and ends the query it belongs to as failed.
      stage = "dead_letters", entry_point = "dead_letters", trigger = "pubsub"
      publishes = [], blobs = "none", documents = "none", model = false, embeds = false, index = false
      memory = "512Mi", cpu = "1", timeout = 60, max_instances = 3, concurrency = 8
    }
    "gcs-finalized" = {
      # An uploaded or overwritten object in the documents bucket becomes a DocumentFetched.
      stage = "gcs_ingest", entry_point = "gcs_finalized", trigger = "google.cloud.storage.object.v1.finalized"
      publishes = ["document-fetched"], blobs = "none", documents = "read", model = false, embeds = false, index = false
      memory = "512Mi", cpu = "1", timeout = 120, max_instances = 5, concurrency = 4
    }
    "gcs-deleted" = {
      # A deleted object becomes a DocumentDeleted (its chunks are removed).
      stage = "gcs_ingest", entry_point = "gcs_deleted", trigger = "google.cloud.storage.object.v1.deleted"
      publishes = ["document-deleted"], blobs = "none", documents = "none", model = false, embeds = false, index = false
      memory = "512Mi", cpu = "1", timeout = 120, max_instances = 5, concurrency = 4
    }
  }

  # Pub/Sub's wait between deliveries of a message its function failed or refused with 429
  # (the retry policy: exponential between minimum and maximum, each at most 600 s,
  # cloud.google.com/pubsub/docs/handling-failures). Ingestion has no one waiting: Pub/Sub's
  # defaults, 10 s .. 600 s, spread a burst's retries over hours. The query loop has a
  # question waiting (RAGBUS_QUERY_TIMEOUT_S, 60 s by default): 1 s .. 60 s, so a refused hop
  # is retried while the answer is still wanted. With max_delivery_attempts = 100 either
  # leaves a refused message far longer than a burst takes to drain (README: Delivery under load).
  retry_backoff = {
    ingestion = { minimum = "10s", maximum = "600s" }
    query     = { minimum = "1s", maximum = "60s" }
  }
  consumer_backoff = { for name, c in local.consumers : name => contains(local.query_stages, c.stage) ? local.retry_backoff.query : local.retry_backoff.ingestion }

  pubsub_functions = { for name, f in local.functions : name => f if f.trigger == "pubsub" }
  gcs_functions    = { for name, f in local.functions : name => f if startswith(f.trigger, "google.cloud.storage.") }

  vertex_location = var.vertex_location != "" ? var.vertex_location : var.region
}
