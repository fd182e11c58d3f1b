# Buckets: blobs (raw HTML and clean text, by reference from messages), documents
# (uploads that trigger ingestion) and the functions' source archives. Access is
# uniform (IAM only, no object ACLs) and never public.

resource "google_storage_bucket" "blobs" {
  name                        = "${var.project}-ragbus-blobs"
  location                    = upper(var.region)
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  depends_on = [google_project_service.api]
}

# Single-region, in the functions' region: an Eventarc Cloud Storage trigger must live in
# the bucket's location.
resource "google_storage_bucket" "documents" {
  name                        = "${var.project}-ragbus-documents"
  location                    = upper(var.region)
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  depends_on = [google_project_service.api]
}

resource "google_storage_bucket" "source" {
  name                        = "${var.project}-ragbus-function-source"
  location                    = upper(var.region)
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = var.labels

  depends_on = [google_project_service.api]
}
