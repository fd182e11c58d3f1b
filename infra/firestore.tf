# Firestore (native mode): processed ids, feeds, documents, query records, dead letters,
# and the chunks with their embeddings (vector search).

# A project that already has the database (every project has "(default)" once Firestore
# was used there) would fail the create with 409: `-var adopt_firestore_database=true`
# imports it into the state instead (or once by hand:
# terraform import google_firestore_database.main projects/<p>/databases/<name>).
import {
  for_each = var.adopt_firestore_database ? toset([var.firestore_database]) : toset([])
  to       = google_firestore_database.main
  id       = "projects/${var.project}/databases/${each.value}"
}

resource "google_firestore_database" "main" {
  name                        = var.firestore_database
  location_id                 = var.firestore_location
  type                        = "FIRESTORE_NATIVE"
  concurrency_mode            = "PESSIMISTIC" # transactions lock what they read (query-record updates)
  app_engine_integration_mode = "DISABLED"
  delete_protection_state     = "DELETE_PROTECTION_ENABLED"
  deletion_policy             = "ABANDON"

  depends_on = [google_project_service.api]
}

# The feed poller lists a feed's ledger records: processed_items where feed_url == X and
# source == "feed" (shared.ingest.processed_items.records). Equality filters can be served by
# merging single-field indexes, but the merge may fail on a large collection; this index
# serves it directly.
resource "google_firestore_index" "processed_items_by_feed" {
  database   = google_firestore_database.main.name
  collection = "processed_items"

  fields {
    field_path = "feed_url"
    order      = "ASCENDING"
  }
  fields {
    field_path = "source"
    order      = "ASCENDING"
  }
}

# Dead letters of one subscription, newest first (ragbus dead-letters / stats).
resource "google_firestore_index" "dead_letters_by_subscription" {
  database   = google_firestore_database.main.name
  collection = "dead_letters"

  fields {
    field_path = "subscription"
    order      = "ASCENDING"
  }
  fields {
    field_path = "at"
    order      = "DESCENDING"
  }
}

# Queries by status: the most recent ones of a status (the web page's list) and the
# running ones past their deadline (the timeout sweep).
resource "google_firestore_index" "queries_by_status_created" {
  database   = google_firestore_database.main.name
  collection = "queries"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }
  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }
}

resource "google_firestore_index" "queries_by_status_deadline" {
  database   = google_firestore_database.main.name
  collection = "queries"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }
  fields {
    field_path = "deadline"
    order      = "ASCENDING"
  }
}

# Nearest-neighbour search over chunk embeddings (find_nearest on chunks.embedding).
# Only vectors of exactly var.embedding_dimension are indexed. __name__ is declared
# before the vector field because the server adds it there; declaring it keeps plans clean.
resource "google_firestore_index" "chunks_embedding" {
  database   = google_firestore_database.main.name
  collection = "chunks"

  fields {
    field_path = "__name__"
    order      = "ASCENDING"
  }
  fields {
    field_path = "embedding"
    vector_config {
      dimension = var.embedding_dimension
      flat {}
    }
  }
}

# Filtered searches (ragbus --source/--since/--until/--kind/--where, the API's filters): where
# clauses before find_nearest need a composite index of the filtered fields with the vector field
# last (cloud.google.com/firestore/docs/vector-search, "Pre-filter with a where clause"). One index
# per shape the FirestoreIndex adapter sends (shared.adapters.gcp.firestore_index.prefilter_index):
# at most one array-contains (source prefix token or a metadata key=value: a composite index holds
# at most one array field, cloud.google.com/firestore/docs/concepts/index-overview; the adapter
# refuses two), the kind equality, the published range (since and until share the field).
# tests/unit/test_infra.py enumerates every combination Filters accepts and fails when a shape the
# adapter builds is missing here, or one here is never built. 11 indexes, 16 composite in all:
# far below Firestore's per-database limit (cloud.google.com/firestore/quotas).
locals {
  chunk_prefilter_indexes = {
    kind                  = [["source", "ASCENDING"]]
    source                = [["source_tokens", "CONTAINS"]]
    published             = [["published_ts", "ASCENDING"]]
    meta                  = [["meta_tokens", "CONTAINS"]]
    kind_source           = [["source_tokens", "CONTAINS"], ["source", "ASCENDING"]]
    kind_meta             = [["meta_tokens", "CONTAINS"], ["source", "ASCENDING"]]
    kind_published        = [["source", "ASCENDING"], ["published_ts", "ASCENDING"]]
    source_published      = [["source_tokens", "CONTAINS"], ["published_ts", "ASCENDING"]]
    meta_published        = [["meta_tokens", "CONTAINS"], ["published_ts", "ASCENDING"]]
    kind_source_published = [["source_tokens", "CONTAINS"], ["source", "ASCENDING"], ["published_ts", "ASCENDING"]]
    kind_meta_published   = [["meta_tokens", "CONTAINS"], ["source", "ASCENDING"], ["published_ts", "ASCENDING"]]
  }
}

resource "google_firestore_index" "chunks_embedding_filtered" {
  for_each   = local.chunk_prefilter_indexes
  database   = google_firestore_database.main.name
  collection = "chunks"

  dynamic "fields" {
    for_each = each.value
    content {
      field_path   = fields.value[0]
      order        = fields.value[1] == "CONTAINS" ? null : fields.value[1]
      array_config = fields.value[1] == "CONTAINS" ? "CONTAINS" : null
    }
  }
  fields {
    field_path = "__name__"
    order      = "ASCENDING"
  }
  fields {
    field_path = "embedding"
    vector_config {
      dimension = var.embedding_dimension
      flat {}
    }
  }
}

# The indexes once declared one resource each: moved, not rebuilt.
moved {
  from = google_firestore_index.chunks_embedding_by_kind
  to   = google_firestore_index.chunks_embedding_filtered["kind"]
}
moved {
  from = google_firestore_index.chunks_embedding_by_source
  to   = google_firestore_index.chunks_embedding_filtered["source"]
}
moved {
  from = google_firestore_index.chunks_embedding_by_published
  to   = google_firestore_index.chunks_embedding_filtered["published"]
}
moved {
  from = google_firestore_index.chunks_embedding_by_source_published
  to   = google_firestore_index.chunks_embedding_filtered["source_published"]
}
moved {
  from = google_firestore_index.chunks_embedding_by_meta
  to   = google_firestore_index.chunks_embedding_filtered["meta"]
}
moved {
  from = google_firestore_index.chunks_embedding_by_meta_published
  to   = google_firestore_index.chunks_embedding_filtered["meta_published"]
}

# Query records expire: Firestore deletes a record some time (typically within a day)
# after its expire_at timestamp. The query-state code sets expire_at to a timestamp
# (a datetime, not an ISO string: TTL ignores other types) of created_at +
# RAGBUS_QUERY_TTL_DAYS. The field is not indexed: a monotonically increasing
# timestamp index would be a write hotspot, and nothing queries it.
resource "google_firestore_field" "queries_expire_at" {
  database   = google_firestore_database.main.name
  collection = "queries"
  field      = "expire_at"

  ttl_config {}
  index_config {}
}

# A conversation expires with its newest turn: each turn moves its expire_at to that query's.
resource "google_firestore_field" "conversations_expire_at" {
  database   = google_firestore_database.main.name
  collection = "conversations"
  field      = "expire_at"

  ttl_config {}
  index_config {}
}

# A delete leaves a tombstone in processed_items (so that no older fetch, redelivery or retried dead
# letter brings the document back). Once the indexer has carried the delete out it sets expire_at to
# the delete's time + RAGBUS_TOMBSTONE_RETENTION_DAYS (at least the 7 days Pub/Sub keeps a message),
# and Firestore deletes the tombstone after it. A tombstone a dead letter names has no expire_at, and a
# live record never has one: neither is deleted.
resource "google_firestore_field" "processed_items_expire_at" {
  database   = google_firestore_database.main.name
  collection = "processed_items"
  field      = "expire_at"

  ttl_config {}
  index_config {}
}

# Large fields are never filtered or ordered on: exempt them from Firestore's automatic
# single-field indexes. An indexed field writes one index entry per array element and map
# value (query records hold every iteration's contexts, chunks their text), which costs
# writes and storage and caps an index entry at 1500 bytes. Keyed "<collection>.<field>".
locals {
  unindexed_fields = {
    "queries.iterations"       = { collection = "queries", field = "iterations" }
    "queries.events"           = { collection = "queries", field = "events" }
    "queries.answer"           = { collection = "queries", field = "answer" }
    "queries.answer_sentences" = { collection = "queries", field = "answer_sentences" }
    "queries.citations"        = { collection = "queries", field = "citations" }
    "queries.stages_done"      = { collection = "queries", field = "stages_done" }
    "queries.model_fallbacks"  = { collection = "queries", field = "model_fallbacks" }
    "queries.original_query"   = { collection = "queries", field = "original_query" }
    "queries.current_query"    = { collection = "queries", field = "current_query" }
    "queries.history"          = { collection = "queries", field = "history" }
    "conversations.turns"      = { collection = "conversations", field = "turns" }
    "chunks.text"              = { collection = "chunks", field = "text" }
    "dead_letters.data"        = { collection = "dead_letters", field = "data" }
    "dead_letters.error"       = { collection = "dead_letters", field = "error" }
  }
}

resource "google_firestore_field" "unindexed" {
  for_each   = local.unindexed_fields
  database   = google_firestore_database.main.name
  collection = each.value.collection
  field      = each.value.field

  # An empty index_config removes every single-field index of the field.
  index_config {}
}
