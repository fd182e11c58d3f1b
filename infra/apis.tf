# The Google APIs this deployment uses. Left enabled on destroy: other things in the
# project may use them too. A project created in the console or with gcloud has only a
# default set on (Service Usage, Cloud Storage, Logging, Monitoring, Cloud Trace and a few
# more; cloud.google.com/service-usage/docs/enabled-service): not Cloud Resource Manager,
# IAM, Pub/Sub, Cloud Run, ... Every resource and IAM binding that calls one of them depends
# on google_project_service.api (directly, or through a resource that does), so a first
# apply enables them before using them (tests/unit/test_infra_deploy.py checks it).

locals {
  apis = [
    "artifactregistry.googleapis.com",
    "aiplatform.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "cloudtrace.googleapis.com",
    # Document AI's layout parser when pdf_reader = "documentai" (documentai.tf); on either way,
    # since enabling costs nothing and the list stays one literal.
    "documentai.googleapis.com",
    "eventarc.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    # Traces go over OTLP to the Telemetry API (cloud.google.com/trace/docs/migrate-to-otlp-endpoints).
    "telemetry.googleapis.com",
  ]
}

resource "google_project_service" "api" {
  for_each           = toset(local.apis)
  service            = each.value
  disable_on_destroy = false

  depends_on = [google_project_service.read_at_plan]
}

# Enabling goes through Service Usage, and the provider reads every google_project_service
# back through Cloud Resource Manager (it checks the project): Resource Manager is enabled
# first and alone, so no other service is enabled or read before it is on. Service Usage
# itself is on in every new project (it is what enables the rest) and cloudbuild.yaml's
# enable-apis step turns both on with gcloud before Terraform runs, so a first apply does not
# meet SERVICE_DISABLED while the enablement propagates.
resource "google_project_service" "resource_manager" {
  service            = "cloudresourcemanager.googleapis.com"
  disable_on_destroy = false
}

# What the data sources call (iam.tf): reading the project (its number names the Pub/Sub
# service agent) and project IAM go through Cloud Resource Manager (above), the GCS agent
# lookup through Cloud Storage. They are enabled on their own so the data sources can depend
# on these alone: Terraform reads a data source only during apply while its depends_on has
# changes pending, and IAM members naming an agent read that way would be replaced
# whenever the list above changed.
resource "google_project_service" "read_at_plan" {
  for_each           = toset(["storage.googleapis.com"])
  service            = each.value
  disable_on_destroy = false

  depends_on = [google_project_service.resource_manager]
}

# Resource Manager was in read_at_plan's set: keep its state.
moved {
  from = google_project_service.read_at_plan["cloudresourcemanager.googleapis.com"]
  to   = google_project_service.resource_manager
}

# Storage was in the list above: keep its state instead of forgetting and re-enabling it.
moved {
  from = google_project_service.api["storage.googleapis.com"]
  to   = google_project_service.read_at_plan["storage.googleapis.com"]
}
