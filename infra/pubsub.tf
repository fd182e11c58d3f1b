# Topics, one per message type (shared/topics.py holds the same list; a test keeps them
# equal), each paired with a dead-letter topic.

locals {
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
}

resource "google_pubsub_topic" "topic" {
  for_each = toset(local.topics)
  name     = each.value
}

resource "google_pubsub_topic" "dead_letter" {
  for_each = toset(local.topics)
  name     = "${each.value}-dead-letter"
}

# Dead letters are kept for inspection and replay.
resource "google_pubsub_subscription" "dead_letter_inbox" {
  for_each                   = toset(local.topics)
  name                       = "${each.value}-dead-letter.inbox"
  topic                      = google_pubsub_topic.dead_letter[each.value].id
  message_retention_duration = "604800s"
}
