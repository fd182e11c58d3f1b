# Identities, least privilege: one service account per function, holding only what its
# code touches. Bindings sit on the topic or bucket where IAM allows it; only Firestore
# (datastore.user), Vertex AI (aiplatform.user), Document AI (documentai.apiUser) and the
# telemetry writers have no narrower scope than the project.

# Reading the project (its number names the Pub/Sub service agent) needs the Cloud Resource
# Manager API, and the GCS agent lookup the Storage API: the reads wait for those two
# (apis.tf: only for them, so a change to the other APIs leaves these reads at plan time).
data "google_project" "this" {
  project_id = var.project

  depends_on = [google_project_service.read_at_plan]
}

data "google_storage_project_service_account" "gcs_agent" {
  project = var.project

  depends_on = [google_project_service.read_at_plan]
}

locals {
  # Every function records processed ids, query state or dead letters in Firestore and
  # writes its logs, traces and metrics.
  function_project_roles = [
    "roles/datastore.user",
    "roles/logging.logWriter",
    # Spans go over OTLP to telemetry.googleapis.com ("Cloud Telemetry Traces Writer").
    "roles/telemetry.tracesWriter",
    "roles/monitoring.metricWriter",
  ]

  function_project_bindings = merge(
    {
      for pair in setproduct(keys(local.functions), local.function_project_roles) :
      "${pair[0]}/${pair[1]}" => { function = pair[0], role = pair[1] }
    },
    # GET /v1/queries/{id}/trace reads the query's trace back from Cloud Trace (traces.get).
    { "gateway/roles/cloudtrace.user" = { function = "gateway", role = "roles/cloudtrace.user" } },
    {
      for name, f in local.functions :
      "${name}/roles/aiplatform.user" => { function = name, role = "roles/aiplatform.user" }
      if(f.embeds && var.embedder == "genai") || (f.index && local.vertex_index)
    },
    # The cleaner reads PDFs through Document AI's layout parser (pdf_reader = "documentai"):
    # documentai.processors.processOnline, which no narrower scope than the project grants.
    {
      for name, f in local.functions :
      "${name}/roles/documentai.apiUser" => { function = name, role = "roles/documentai.apiUser" }
      if f.stage == "cleaner" && var.pdf_reader == "documentai"
    },
    # The roles the chosen provider's model calls need (registry.tf: provider_roles; Gemini on
    # Vertex AI: roles/aiplatform.user), for the functions that call the model.
    {
      for pair in setproduct([for name, f in local.functions : name if f.model], local.provider_roles[var.llm_provider]) :
      "${pair[0]}/${pair[1]}" => { function = pair[0], role = pair[1] }
    },
  )

  # What Cloud Build needs to build a function from source (Cloud Run functions'
  # "custom build service account" page): write build logs, push the image to Artifact
  # Registry, read the source object and the build's staging objects.
  build_project_roles = [
    "roles/logging.logWriter",
    "roles/artifactregistry.writer",
    "roles/storage.objectAdmin",
  ]

  # The chosen provider's secrets (registry.tf: provider_secrets) that are set: variable -> secret id.
  model_secrets = { for name, secret in local.provider_secrets[var.llm_provider] : name => secret if secret != "" }
  model_secret_grants = merge([
    for name, f in local.functions : {
      for variable, secret in local.model_secrets : "${name}/${variable}" => { function = name, secret = secret }
    } if f.model
  ]...)

  function_publishes = merge([
    for name, f in local.functions : {
      for topic in f.publishes : "${name}/${topic}" => { function = name, topic = topic }
    }
  ]...)

  blob_roles     = { read = "roles/storage.objectViewer", write = "roles/storage.objectUser" }
  document_roles = { read = "roles/storage.objectViewer" }
}

resource "google_service_account" "function" {
  for_each     = local.functions
  account_id   = "rb-${each.key}"
  display_name = "ragbus ${each.key}"
  description  = "Runs the ragbus ${each.key} function (entry point ${each.value.entry_point})"

  depends_on = [google_project_service.api]
}

# The identity Cloud Build runs the functions' builds as (build_config.service_account).
# The identity applying this configuration needs roles/iam.serviceAccountUser on it.
resource "google_service_account" "build" {
  account_id   = "rb-build"
  display_name = "ragbus function builds"
  description  = "Cloud Build builds the ragbus functions' images with this account"

  depends_on = [google_project_service.api]
}

resource "google_project_iam_member" "build" {
  for_each = toset(local.build_project_roles)
  project  = var.project
  role     = each.value
  member   = google_service_account.build.member

  depends_on = [google_project_service.api]
}

resource "google_project_iam_member" "function" {
  for_each = local.function_project_bindings
  project  = var.project
  role     = each.value.role
  member   = google_service_account.function[each.value.function].member

  depends_on = [google_project_service.api]
}

# Only the model-calling functions may read the model provider's secrets (the openai server's
# key), and only those.
resource "google_secret_manager_secret_iam_member" "model_secret" {
  for_each  = local.model_secret_grants
  project   = var.project
  secret_id = each.value.secret
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.function[each.value.function].member

  depends_on = [google_project_service.api]
}

# Only the gateway may read its API token.
resource "google_secret_manager_secret_iam_member" "gateway_api_token" {
  for_each  = var.gateway_api_token_secret == "" ? {} : { for name, f in local.functions : name => f if f.trigger == "http" }
  project   = var.project
  secret_id = var.gateway_api_token_secret
  role      = "roles/secretmanager.secretAccessor"
  member    = google_service_account.function[each.key].member

  depends_on = [google_project_service.api]
}

resource "google_pubsub_topic_iam_member" "function_publisher" {
  for_each = local.function_publishes
  topic    = google_pubsub_topic.topic[each.value.topic].id
  role     = "roles/pubsub.publisher"
  member   = google_service_account.function[each.value.function].member
}

# Blob writers overwrite on redelivery (same key, same bytes), which needs delete as well
# as create: objectUser. Readers get objectViewer.
resource "google_storage_bucket_iam_member" "function_blobs" {
  for_each = { for name, f in local.functions : name => f if f.blobs != "none" }
  bucket   = google_storage_bucket.blobs.name
  role     = local.blob_roles[each.value.blobs]
  member   = google_service_account.function[each.key].member
}

resource "google_storage_bucket_iam_member" "function_documents" {
  for_each = { for name, f in local.functions : name => f if f.documents != "none" }
  bucket   = google_storage_bucket.documents.name
  role     = local.document_roles[each.value.documents]
  member   = google_service_account.function[each.key].member
}

# Pub/Sub pushes with an OIDC token of this account; it may invoke the push-triggered
# functions and nothing else.
resource "google_service_account" "push_invoker" {
  account_id   = "rb-pubsub-push"
  display_name = "ragbus Pub/Sub push invoker"
  description  = "Identity in the OIDC token of every ragbus push subscription"

  depends_on = [google_project_service.api]
}

resource "google_cloud_run_v2_service_iam_member" "push_invoker" {
  for_each = local.pubsub_functions
  project  = var.project
  location = var.region
  name     = google_cloudfunctions2_function.function[each.key].name
  role     = "roles/run.invoker"
  member   = google_service_account.push_invoker.member
}

# The Pub/Sub service agent mints the push OIDC tokens for that account.
resource "google_service_account_iam_member" "pubsub_agent_mints_push_tokens" {
  service_account_id = google_service_account.push_invoker.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent

  depends_on = [google_project_service.api]
}

# Eventarc delivers the documents bucket's events with this account.
resource "google_service_account" "eventarc_trigger" {
  account_id   = "rb-eventarc-trigger"
  display_name = "ragbus Eventarc trigger"
  description  = "Delivers documents-bucket events to the gcs-finalized and gcs-deleted functions"

  depends_on = [google_project_service.api]
}

resource "google_project_iam_member" "eventarc_trigger_receiver" {
  project = var.project
  role    = "roles/eventarc.eventReceiver"
  member  = google_service_account.eventarc_trigger.member

  depends_on = [google_project_service.api]
}

resource "google_cloud_run_v2_service_iam_member" "eventarc_invoker" {
  for_each = local.gcs_functions
  project  = var.project
  location = var.region
  name     = google_cloudfunctions2_function.function[each.key].name
  role     = "roles/run.invoker"
  member   = google_service_account.eventarc_trigger.member
}

# Cloud Storage publishes its object events into Eventarc's Pub/Sub transport.
resource "google_project_iam_member" "gcs_agent_publishes_events" {
  project = var.project
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${data.google_storage_project_service_account.gcs_agent.email_address}"

  depends_on = [google_project_service.api]
}

# Who may call the gateway: named principals, and everyone only when asked for.
resource "google_cloud_run_v2_service_iam_member" "gateway_invoker" {
  for_each = toset(concat(var.gateway_invokers, var.allow_unauthenticated_gateway ? ["allUsers"] : []))
  project  = var.project
  location = var.region
  name     = google_cloudfunctions2_function.function["gateway"].name
  role     = "roles/run.invoker"
  member   = each.value
}
