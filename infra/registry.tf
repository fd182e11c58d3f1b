# Generated from shared/runtime/stages.py and shared/contract/providers.py by
# `python -m shared.tools.docs`: edit those, then run it (tests/unit/test_settings_table.py
# fails while this file is stale). Hand-written infra/ reads these locals.

locals {
  # One per message class (shared/contract/messages.py) and stage hop, each paired with a dead-letter topic (pubsub.tf).
  topics = [
    "feed-poll-requested",
    "document-fetched",
    "document-deleted",
    "document-cleaned",
    "document-indexed",
    "query-submitted",
    "query-transformed",
    "contexts-retrieved",
    "query-graded",
    "answer-ready",
  ]

  # One push subscription per (stage, consumed topic), keyed by the subscription name the code uses.
  consumers = {
    "feed_poller.feed-poll-requested" = { stage = "feed_poller", topic = "feed-poll-requested", function = "feed-poller" }
    "cleaner.document-fetched"        = { stage = "cleaner", topic = "document-fetched", function = "cleaner" }
    "indexer.document-cleaned"        = { stage = "indexer", topic = "document-cleaned", function = "indexer-document-cleaned" }
    "indexer.document-deleted"        = { stage = "indexer", topic = "document-deleted", function = "indexer-document-deleted" }
    "transformer.query-submitted"     = { stage = "transformer", topic = "query-submitted", function = "transformer-query-submitted" }
    "transformer.query-graded"        = { stage = "transformer", topic = "query-graded", function = "transformer-query-graded" }
    "retriever.query-transformed"     = { stage = "retriever", topic = "query-transformed", function = "retriever" }
    "grader.contexts-retrieved"       = { stage = "grader", topic = "contexts-retrieved", function = "grader" }
    "synthesizer.query-graded"        = { stage = "synthesizer", topic = "query-graded", function = "synthesizer" }
  }

  # Every Cloud Function, keyed by its short name (deployed as "ragbus-<key>"); the fields are
  # explained in stages.tf.
  functions = {
    "feed-poller" = {
      # Polls every registered feed with 10 s fetch timeouts and retries: give it time.
      stage     = "feed_poller", entry_point = "feed_poller", trigger = "pubsub"
      publishes = ["document-fetched", "document-deleted"], blobs = "write", documents = "none", model = false, embeds = false, index = false
      memory    = "1Gi", cpu = "1", timeout = 540, max_instances = 3, concurrency = 1
    }
    "gcs-finalized" = {
      # An uploaded or overwritten object in the documents bucket becomes a DocumentFetched.
      stage     = "gcs_ingest", entry_point = "gcs_finalized", trigger = "google.cloud.storage.object.v1.finalized"
      publishes = ["document-fetched"], blobs = "none", documents = "read", model = false, embeds = false, index = false
      memory    = "512Mi", cpu = "1", timeout = 120, max_instances = 5, concurrency = 4
    }
    "gcs-deleted" = {
      # A deleted object becomes a DocumentDeleted (its chunks are removed).
      stage     = "gcs_ingest", entry_point = "gcs_deleted", trigger = "google.cloud.storage.object.v1.deleted"
      publishes = ["document-deleted"], blobs = "none", documents = "none", model = false, embeds = false, index = false
      memory    = "512Mi", cpu = "1", timeout = 120, max_instances = 5, concurrency = 4
    }
    "cleaner" = {
      # Reads raw HTML from the blob bucket, or the uploaded object for GCS-sourced documents.
      stage     = "cleaner", entry_point = "cleaner", trigger = "pubsub"
      publishes = ["document-cleaned"], blobs = "write", documents = "read", model = false, embeds = false, index = false
      memory    = "1Gi", cpu = "1", timeout = 120, max_instances = 10, concurrency = 4
    }
    "indexer-document-cleaned" = {
      stage     = "indexer", entry_point = "indexer", trigger = "pubsub"
      publishes = ["document-indexed"], blobs = "read", documents = "none", model = false, embeds = true, index = true
      memory    = "2Gi", cpu = "1", timeout = 300, max_instances = 5, concurrency = 2
    }
    "indexer-document-deleted" = {
      # Deletes chunks only: the embedder is built lazily and never loaded here.
      stage     = "indexer", entry_point = "indexer", trigger = "pubsub"
      publishes = ["document-indexed"], blobs = "none", documents = "none", model = false, embeds = false, index = true
      memory    = "512Mi", cpu = "1", timeout = 120, max_instances = 3, concurrency = 4
    }
    "transformer-query-submitted" = {
      stage     = "transformer", entry_point = "transformer", trigger = "pubsub"
      publishes = ["query-transformed"], blobs = "none", documents = "none", model = true, embeds = false, index = false
      memory    = "512Mi", cpu = "1", timeout = 150, max_instances = 20, concurrency = 8
    }
    "transformer-query-graded" = {
      stage     = "transformer", entry_point = "transformer", trigger = "pubsub"
      publishes = ["query-graded", "query-transformed"], blobs = "none", documents = "none", model = true, embeds = false, index = false
      memory    = "512Mi", cpu = "1", timeout = 150, max_instances = 20, concurrency = 8
    }
    "retriever" = {
      stage     = "retriever", entry_point = "retriever", trigger = "pubsub"
      publishes = ["contexts-retrieved"], blobs = "none", documents = "none", model = false, embeds = true, index = true
      memory    = "2Gi", cpu = "1", timeout = 120, max_instances = 10, concurrency = 4
    }
    "grader" = {
      stage     = "grader", entry_point = "grader", trigger = "pubsub"
      publishes = ["query-graded"], blobs = "none", documents = "none", model = true, embeds = false, index = false
      memory    = "512Mi", cpu = "1", timeout = 150, max_instances = 20, concurrency = 8
    }
    "synthesizer" = {
      # Loads the embedder for the extractive answer when the model's answer is unusable.
      stage     = "synthesizer", entry_point = "synthesizer", trigger = "pubsub"
      publishes = ["answer-ready"], blobs = "none", documents = "none", model = true, embeds = true, index = false
      memory    = "2Gi", cpu = "1", timeout = 180, max_instances = 10, concurrency = 4
    }
    "dead-letters" = {
      # Records what Pub/Sub dead-lettered (a push subscription on every dead-letter topic, pubsub.tf) and ends the query it belongs to as failed.
      stage     = "dead_letters", entry_point = "dead_letters", trigger = "pubsub"
      publishes = [], blobs = "none", documents = "none", model = false, embeds = false, index = false
      memory    = "512Mi", cpu = "1", timeout = 60, max_instances = 3, concurrency = 8
    }
    "gateway" = {
      # HTTP: REST, event stream, MCP and the web page; /search embeds the query.
      stage     = "gateway", entry_point = "gateway", trigger = "http"
      publishes = ["query-submitted"], blobs = "none", documents = "none", model = false, embeds = true, index = true
      memory    = "2Gi", cpu = "1", timeout = 300, max_instances = 10, concurrency = 40
    }
  }

  # The query loop's stages: their subscriptions retry quickly (stages.tf: consumer_backoff).
  query_stages = ["transformer", "retriever", "grader", "synthesizer"]

  # What the functions that call the model get, per provider: plain variables, secrets
  # (variable -> Secret Manager id, given only when set) and project roles.
  provider_env = {
    local = {}
    openai = {
      RAGBUS_OPENAI_BASE_URL  = var.openai_base_url
      RAGBUS_OPENAI_MODEL     = var.openai_model
      RAGBUS_OPENAI_TIMEOUT_S = tostring(var.openai_timeout_s)
    }
    gemini = {}
  }
  provider_secrets = {
    local = {}
    openai = {
      RAGBUS_OPENAI_API_KEY = var.openai_api_key_secret
    }
    gemini = {}
  }
  provider_roles = {
    local  = []
    openai = []
    gemini = ["roles/aiplatform.user"]
  }

  # What the plan refuses per provider (functions.tf's preconditions): a required variable
  # left empty (ready, needs), its key's secret sent to a plain-http API base (clear_key), one
  # invocation's model use (budget_s, budget: its call budget) outlasting a model function.
  provider_checks = {
    local = {
      ready     = true
      needs     = ""
      clear_key = false
      budget_s  = 0
      budget    = ""
    }
    openai = {
      ready     = var.openai_base_url != "" && var.openai_model != ""
      needs     = "llm_provider = \"openai\" needs openai_base_url and openai_model."
      clear_key = var.openai_api_key_secret != "" && !startswith(var.openai_base_url, "https://")
      budget_s  = 2 * var.openai_timeout_s + 20
      budget    = "2 x openai_timeout_s + 20 s"
    }
    gemini = {
      ready     = true
      needs     = ""
      clear_key = false
      budget_s  = 3 * var.gemini_timeout_s + 5
      budget    = "3 x gemini_timeout_s + 5 s"
    }
  }
}

variable "llm_provider" {
  description = "Language model of the query loop (RAGBUS_LLM), from the provider registry (shared/contract/providers.py): 'local': the deterministic stand-in; 'openai': an OpenAI-compatible server the functions can reach (openai_base_url, openai_model, openai_api_key_secret, openai_timeout_s); 'gemini': Vertex AI, with the functions' own identities (gemini_model, gemini_location, gemini_timeout_s)"
  type        = string
  default     = "gemini"

  validation {
    condition     = contains(["local", "openai", "gemini"], var.llm_provider)
    error_message = "llm_provider must be 'local', 'openai' or 'gemini'."
  }
}
