# Every 15 minutes: poll every registered feed (FeedPollRequested with no feed_urls).
#
# The body is fixed, so every run carries the same request_id, requested_at and
# idempotency_key. That is harmless: nothing deduplicates on the poll request itself
# (the dispatcher does not, and the poller ignores requested_at); the poller is idempotent
# per feed item instead (create-if-absent of processed_items by feed and guid, re-indexing
# only when the content hash changes), so overlapping or repeated polls index nothing twice.

locals {
  feed_poll_message = jsonencode({
    request_id   = "scheduler/ragbus-feed-poll"
    feed_urls    = []
    requested_at = "2024-01-01T00:00:00Z"
  })
  feed_poll_attributes = {
    type            = "FeedPollRequested"
    schema_version  = "1"
    idempotency_key = "poll/scheduler/ragbus-feed-poll"
  }
}

resource "google_cloud_scheduler_job" "feed_poll" {
  name        = "ragbus-feed-poll"
  region      = var.region
  description = "Publishes FeedPollRequested to feed-poll-requested"
  schedule    = var.feed_poll_schedule
  time_zone   = var.feed_poll_time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.topic["feed-poll-requested"].id
    data       = base64encode(local.feed_poll_message)
    attributes = local.feed_poll_attributes
  }

  depends_on = [google_project_service.api]
}
