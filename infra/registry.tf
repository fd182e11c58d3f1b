# Generated from shared/runtime/stages.py and shared/contract/providers.py by
# `python -m shared.tools.docs`: edit those, then run it (tests/unit/test_settings_table.py
# fails while this file is stale). Hand-written infra/ reads these locals.

locals {
  # One per message class (shared/contract/messages.py), each paired with a dead-letter topic (pubsub.tf).
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
