# Vertex AI Vector Search, when var.index_backend = "vertex" (RAGBUS_INDEX=vertex): the
# chunk vectors live in a streaming index served by a deployed index on a public endpoint;
# the chunks' texts and vectors for exact re-scoring stay in Firestore
# (shared/adapters/gcp/vertex_index.py). The functions get the three names the code reads
# (RAGBUS_VERTEX_INDEX, RAGBUS_VERTEX_ENDPOINT, RAGBUS_VERTEX_DEPLOYED_INDEX, functions.tf)
# and roles/aiplatform.user where they touch the index (iam.tf).
#
# Deploying an index takes tens of minutes, and a deployed index is billed per replica-hour
# whether or not it is queried. The create timeouts below bound how long an apply waits for
# each (the provider's defaults are 180 min for an index and 45 min for a deployed index);
# cloudbuild.yaml's deploy step is timed to outlast them (tests/unit/test_infra_deploy.py).

locals {
  # The index choice (docs/capacity.md, "The index choice"): the same workload and prices files
  # and the same formula as bench/capacity.py (firestore_index_usd_per_day; a unit test
  # evaluates both). A Firestore vector query reads every index entry, billed one read per 100,
  # plus the documents it returns; Vector Search costs its nodes whatever the questions.
  capacity_workload = jsondecode(file("${path.module}/../bench/data/capacity/workload.json"))
  capacity_prices   = jsondecode(file("${path.module}/../bench/data/capacity/prices.json"))
  index_searches_per_day = var.expected_questions_per_day * local.capacity_workload.vector_searches_per_question.value * (1 + local.capacity_workload.refinements_per_question.value)
  firestore_index_read_usd_per_day = local.index_searches_per_day * (ceil(var.expected_chunks / local.capacity_prices.firestore_vector_entries_per_read.value) + local.capacity_workload.results_per_search.value) * local.capacity_prices.firestore_read_per_100k.value / 100000
  index_backend = var.index_backend != "" ? var.index_backend : (local.firestore_index_read_usd_per_day <= var.max_index_read_usd_per_day ? "firestore" : "vertex")
  vertex_index  = local.index_backend == "vertex"
  # Letters, digits and underscores, starting with a letter (the API's rule).
  vertex_deployed_index_id = "ragbus_chunks"
}

resource "google_vertex_ai_index" "chunks" {
  count               = local.vertex_index ? 1 : 0
  region              = local.vertex_location
  display_name        = "ragbus-chunks"
  description         = "ragbus chunk embeddings (streamed upserts and removals by the indexer)"
  labels              = var.labels
  index_update_method = "STREAM_UPDATE" # the adapter upserts and removes datapoints as documents change

  metadata {
    config {
      dimensions                  = var.embedding_dimension
      approximate_neighbors_count = 150
      # Unit-normalised vectors with the dot product: the cosine the adapter re-scores with.
      distance_measure_type = "DOT_PRODUCT_DISTANCE"
      feature_norm_type     = "UNIT_L2_NORM"
      shard_size            = "SHARD_SIZE_SMALL"
      algorithm_config {
        tree_ah_config {
          leaf_node_embedding_count    = 1000
          leaf_nodes_to_search_percent = 10
        }
      }
    }
  }

  timeouts {
    create = "60m"
    update = "60m"
  }

  depends_on = [google_project_service.api]
}

resource "google_vertex_ai_index_endpoint" "chunks" {
  count                   = local.vertex_index ? 1 : 0
  region                  = local.vertex_location
  display_name            = "ragbus-chunks"
  labels                  = var.labels
  public_endpoint_enabled = true

  depends_on = [google_project_service.api]
}

resource "google_vertex_ai_index_endpoint_deployed_index" "chunks" {
  count             = local.vertex_index ? 1 : 0
  index_endpoint    = google_vertex_ai_index_endpoint.chunks[0].id
  index             = google_vertex_ai_index.chunks[0].id
  deployed_index_id = local.vertex_deployed_index_id
  display_name      = "ragbus-chunks"

  dedicated_resources {
    machine_spec {
      machine_type = var.vertex_index_machine_type
    }
    min_replica_count = var.vertex_index_replicas.min
    max_replica_count = var.vertex_index_replicas.max
  }

  timeouts {
    create = "45m"
    update = "45m"
  }
}
