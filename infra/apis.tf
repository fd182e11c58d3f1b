# The Google APIs this deployment uses. Left enabled on destroy: other things in the
# project may use them too. Every resource, data source and IAM binding that calls one of
# them depends on google_project_service.api (directly, or through a resource that does),
# so a first apply on a new project enables them before using them. Enabling them goes
# through the Service Usage API, which every project has on from creation.

locals {
  apis = [
    "artifactregistry.googleapis.com",
    "aiplatform.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    # Project IAM (google_project_iam_member) and reading the project (data.google_project)
    # go through the Cloud Resource Manager API, which a new project does not have on.
    "cloudresourcemanager.googleapis.com",
    "cloudscheduler.googleapis.com",
    "cloudtrace.googleapis.com",
    "eventarc.googleapis.com",
    "firestore.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
    # Traces go over OTLP to the Telemetry API (cloud.google.com/trace/docs/migrate-to-otlp-endpoints).
    "telemetry.googleapis.com",
  ]
}

resource "google_project_service" "api" {
  for_each           = toset(local.apis)
  service            = each.value
  disable_on_destroy = false
}
