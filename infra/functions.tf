# Every Cloud Function (gen2) deploys the same source: the repository root, whose main.py
# exposes each stage's target. The Python buildpack installs requirements.txt from the
# root of that source: the lock of every runtime dependency (`make lock` writes it).

locals {
  # Relative to the repository root; glob patterns (archive provider >= 2.5).
  source_excludes = [
    ".git/**", ".venv/**", "venv/**", ".ragbus/**", "tests/**", "bench/**", "docs/**", "infra/**",
    "*.egg-info/**", ".pytest_cache/**", ".ruff_cache/**", "**/__pycache__/**", "**/*.pyc",
    "node_modules/**", ".terraform/**", "cloudbuild.yaml", "Makefile", "requirements-dev.txt",
  ]

  # Where each Gemini model is served: the same table the code checks at start-up
  # (shared/contract/model_locations.py). An unlisted model is checked by the code alone.
  gemini_table    = jsondecode(file("${path.module}/../shared/contract/gemini_locations.json"))
  gemini_model_id = lower(var.gemini_model != "" ? var.gemini_model : local.gemini_table.default_model)
  gemini_location = var.gemini_location != "" ? var.gemini_location : (startswith(var.region, "europe-") ? local.gemini_table.eu_default.location : "global")
  gemini_served   = try(local.gemini_table.models[local.gemini_model_id], endswith(local.gemini_model_id, "-preview") ? local.gemini_table.preview : null)
  gemini_location_served = try(
    contains(local.gemini_served.locations, local.gemini_location) || (local.gemini_served.regional && !contains(["global", "us", "eu"], local.gemini_location)),
    true,
  )

  source_zip = var.source_archive != "" ? var.source_archive : data.archive_file.source[0].output_path
  source_md5 = var.source_archive != "" ? filemd5(var.source_archive) : data.archive_file.source[0].output_md5

  common_env = merge(
    {
      RAGBUS_RUNTIME                  = "gcp"
      GOOGLE_CLOUD_PROJECT            = var.project
      GOOGLE_CLOUD_LOCATION           = local.vertex_location
      RAGBUS_BUCKET                   = google_storage_bucket.blobs.name
      RAGBUS_DOCUMENTS_BUCKET         = google_storage_bucket.documents.name
      RAGBUS_LLM                      = var.llm_provider
      RAGBUS_GEMINI_MODEL             = var.gemini_model
      RAGBUS_GEMINI_LOCATION          = local.gemini_location
      RAGBUS_GEMINI_TIMEOUT_S         = tostring(var.gemini_timeout_s)
      RAGBUS_EMBEDDER                 = var.embedder
      RAGBUS_EMBED_MODEL              = var.embed_model
      RAGBUS_EMBED_DIMENSION          = tostring(var.embedding_dimension)
      RAGBUS_MAX_DELIVERY_ATTEMPTS    = tostring(var.max_delivery_attempts)
      RAGBUS_QUERY_TTL_DAYS           = tostring(var.query_retention_days)
      RAGBUS_TOMBSTONE_RETENTION_DAYS = tostring(var.tombstone_retention_days)
      RAGBUS_TRACING                  = "1"
      RAGBUS_INDEX                    = local.index_backend
    },
    var.firestore_database == "(default)" ? {} : { RAGBUS_FIRESTORE_DATABASE = var.firestore_database },
    # The chosen provider's own variables (registry.tf: provider_env); its key, if any, is a
    # secret given only to the functions that call the model (service_config below).
    local.provider_env[var.llm_provider],
    # Vector Search mode (vertex.tf): the resource names the adapter connects to. Referencing
    # the deployed index makes every function wait until the index is served.
    local.vertex_index ? {
      RAGBUS_VERTEX_INDEX          = google_vertex_ai_index.chunks[0].id
      RAGBUS_VERTEX_ENDPOINT       = google_vertex_ai_index_endpoint.chunks[0].id
      RAGBUS_VERTEX_DEPLOYED_INDEX = google_vertex_ai_index_endpoint_deployed_index.chunks[0].deployed_index_id
    } : {},
    # PDFs read by Document AI's layout parser (documentai.tf): the processor's full name.
    var.pdf_reader == "documentai" ? {
      RAGBUS_PDF_READER           = "documentai"
      RAGBUS_DOCUMENTAI_PROCESSOR = google_document_ai_processor.layout[0].id
      RAGBUS_DOCUMENTAI_LOCATION  = var.documentai_location
    } : {},
  )
}

data "archive_file" "source" {
  count       = var.source_archive == "" ? 1 : 0
  type        = "zip"
  source_dir  = "${path.module}/.."
  output_path = "${path.module}/.build/ragbus-source.zip"
  excludes    = local.source_excludes
}

# The object's name carries the archive's hash, so a changed source redeploys every
# function and an unchanged one redeploys none.
resource "google_storage_bucket_object" "source" {
  name   = "ragbus-${local.source_md5}.zip"
  bucket = google_storage_bucket.source.name
  source = local.source_zip
}

resource "google_cloudfunctions2_function" "function" {
  for_each = local.functions
  name     = "ragbus-${each.key}"
  location = var.region
  labels   = merge(var.labels, { stage = replace(each.value.stage, "_", "-") })

  build_config {
    # python311 is deprecated on 2027-10-24 and decommissioned on 2028-04-24; python313 is GA until
    # its deprecation on 2029-10-10 (python314 GA, python315 in preview): the Python table of
    # docs.cloud.google.com/run/docs/runtimes/python and of Cloud Run functions' runtime support
    # schedule. `make lock` checks that every runtime pin has a 3.13 wheel.
    runtime     = "python313"
    entry_point = each.value.entry_point
    # Projects created since mid-2024 give Cloud Build's default identity no build rights:
    # the build runs as rb-build (iam.tf) with only what a function build needs.
    service_account = google_service_account.build.id
    source {
      storage_source {
        bucket = google_storage_bucket.source.name
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    available_memory                 = each.value.memory
    available_cpu                    = each.value.cpu
    timeout_seconds                  = each.value.timeout
    min_instance_count               = each.key == "gateway" ? var.gateway_min_instances : 0
    max_instance_count               = lookup(var.max_instances, each.key, each.value.max_instances)
    max_instance_request_concurrency = each.value.concurrency
    service_account_email            = google_service_account.function[each.key].email
    all_traffic_on_latest_revision   = true
    # Only Pub/Sub pushes and Eventarc reach the event-driven functions; the gateway
    # answers the internet (still behind IAM unless allow_unauthenticated_gateway).
    ingress_settings = each.value.trigger == "http" ? "ALLOW_ALL" : "ALLOW_INTERNAL_ONLY"
    environment_variables = merge(
      local.common_env,
      {
        RAGBUS_STAGE          = each.value.stage
        RAGBUS_ACK_DEADLINE_S = tostring(each.value.timeout)
        OTEL_SERVICE_NAME     = "ragbus-${each.key}"
        # functions-framework serves a Python function with gunicorn threads, 4 per CPU unless
        # THREADS says otherwise: as many as Cloud Run sends it at once, or pushes Cloud Run
        # admitted would queue inside the instance (cloud.google.com/functions/docs/configuring/concurrency).
        THREADS = tostring(each.value.concurrency)
      },
      # Cloud Run's front end terminates TLS and is the only way in: trust its
      # X-Forwarded-Proto (gunicorn/uvicorn trust only 127.0.0.1 by default), or the
      # page's own https POST looks cross-origin to the gateway (services/gateway/guard.py).
      each.value.trigger == "http" ? { FORWARDED_ALLOW_IPS = "*" } : {},
    )
    # The chosen provider's secrets that are set (iam.tf: model_secrets), to the model-calling functions.
    dynamic "secret_environment_variables" {
      for_each = each.value.model ? local.model_secrets : {}
      content {
        key        = secret_environment_variables.key
        project_id = var.project
        secret     = secret_environment_variables.value
        version    = "latest"
      }
    }
    # The API token the gateway asks of REST and MCP callers, beside Cloud Run IAM
    # (callers send the identity token as X-Serverless-Authorization).
    dynamic "secret_environment_variables" {
      for_each = each.value.trigger == "http" && var.gateway_api_token_secret != "" ? [var.gateway_api_token_secret] : []
      content {
        key        = "RAGBUS_API_TOKEN"
        project_id = var.project
        secret     = secret_environment_variables.value
        version    = "latest"
      }
    }
  }

  lifecycle {
    # What the code would refuse at its first query, refused at plan time instead: per provider,
    # from its registry row (shared/contract/providers.py; registry.tf: provider_checks).
    precondition {
      condition     = local.provider_checks[var.llm_provider].ready
      error_message = local.provider_checks[var.llm_provider].needs
    }
    precondition {
      condition     = !local.provider_checks[var.llm_provider].clear_key
      error_message = "llm_provider = \"${var.llm_provider}\": its key's secret is set, so its API base must be https:// (the key is never sent in clear text)."
    }
    precondition {
      # One invocation's model use, at most (the row's call budget), must end before the function does.
      condition     = !each.value.model || local.provider_checks[var.llm_provider].budget_s < each.value.timeout
      error_message = "${local.provider_checks[var.llm_provider].budget} must be shorter than the timeout of every function that calls the model (150 s for the transformer and grader, 180 s for the synthesizer)."
    }
    precondition {
      # Firestore's index cost grows with the corpus times the questions (vertex.tf: the index choice).
      condition     = var.index_backend != "firestore" || local.firestore_index_read_usd_per_day <= var.max_index_read_usd_per_day
      error_message = "index_backend = \"firestore\" at expected_chunks = ${var.expected_chunks} and expected_questions_per_day = ${var.expected_questions_per_day}: its vector index reads would cost about ${floor(local.firestore_index_read_usd_per_day)} US dollars a day, past max_index_read_usd_per_day = ${var.max_index_read_usd_per_day}. Leave index_backend empty (Vertex AI Vector Search is chosen), or raise the bound knowingly (docs/capacity.md)."
    }
    precondition {
      # A location that does not serve the model answers 404 on every call: refused here as
      # the code refuses it at start-up (shared/contract/gemini_locations.json).
      condition     = var.llm_provider != "gemini" || local.gemini_location_served
      error_message = "gemini_location '${local.gemini_location}' does not serve ${local.gemini_model_id}: it is served from ${try(join(", ", local.gemini_served.locations), "?")}${try(local.gemini_served.regional, false) ? " and regional endpoints" : ""} (shared/contract/gemini_locations.json)."
    }
  }

  # Uploads to the documents bucket arrive through Eventarc (GCS has no push subscription
  # of ours to carry a dead-letter policy; Eventarc retries with backoff for 24 hours, and
  # the entry point drops events older than RAGBUS_EVENT_MAX_AGE_S).
  dynamic "event_trigger" {
    for_each = startswith(each.value.trigger, "google.cloud.storage.") ? [each.value.trigger] : []
    content {
      trigger_region        = var.region
      event_type            = event_trigger.value
      retry_policy          = "RETRY_POLICY_RETRY"
      service_account_email = google_service_account.eventarc_trigger.email
      event_filters {
        attribute = "bucket"
        value     = google_storage_bucket.documents.name
      }
    }
  }

  depends_on = [
    google_project_service.api,
    google_project_iam_member.build,
    google_project_iam_member.gcs_agent_publishes_events,
    google_project_iam_member.eventarc_trigger_receiver,
    google_secret_manager_secret_iam_member.model_secret,
    google_secret_manager_secret_iam_member.gateway_api_token,
  ]
}
