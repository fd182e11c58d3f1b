output "gateway_url" {
  description = "HTTPS URL of the gateway (REST API, event stream, MCP, web page)"
  value       = google_cloudfunctions2_function.function["gateway"].service_config[0].uri
}

output "blobs_bucket" {
  description = "Bucket of raw and clean text (RAGBUS_BUCKET)"
  value       = google_storage_bucket.blobs.name
}

output "documents_bucket" {
  description = "Upload documents here to ingest them; delete them to remove their chunks"
  value       = google_storage_bucket.documents.name
}

output "source_bucket" {
  description = "Bucket holding the functions' source archives"
  value       = google_storage_bucket.source.name
}

output "function_urls" {
  description = "URL of every function, by short name"
  value       = { for name, f in google_cloudfunctions2_function.function : name => f.service_config[0].uri }
}

output "subscriptions" {
  description = "Push subscription per consumer (<stage>.<topic>) and the function it pushes to"
  value       = { for name, c in local.consumers : name => "ragbus-${c.function}" }
}

output "firestore_database" {
  description = "Firestore database id"
  value       = google_firestore_database.main.name
}
