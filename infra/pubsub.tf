# Topics, one per message type (local.topics, generated into registry.tf from the message
# classes), each paired with a dead-letter topic; one push subscription per consumer.

locals {
  pubsub_service_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

resource "google_pubsub_topic" "topic" {
  for_each = toset(local.topics)
  name     = each.value
  labels   = var.labels

  depends_on = [google_project_service.api]
}

resource "google_pubsub_topic" "dead_letter" {
  for_each = toset(local.topics)
  name     = "${each.value}-dead-letter"
  labels   = var.labels

  depends_on = [google_project_service.api]
}

# Dead letters are kept for inspection and replay.
resource "google_pubsub_subscription" "dead_letter_inbox" {
  for_each                   = toset(local.topics)
  name                       = "${each.value}-dead-letter.inbox"
  topic                      = google_pubsub_topic.dead_letter[each.value].id
  message_retention_duration = "604800s"
  labels                     = var.labels

  expiration_policy {
    ttl = ""
  }
}

# One push subscription per consumer, named as in the code (<stage>.<topic>), pushing to
# that consumer's function: the same topology as the emulator runs locally (push
# subscriptions to each stage's functions-framework server). Eventarc's Pub/Sub triggers
# manage their own subscriptions, which Terraform cannot give a dead-letter policy;
# explicit subscriptions can.
#
# Delivery under load (docs/google-cloud.md): Cloud Run answers 429 to a push that finds every instance
# busy and none may start, and Pub/Sub counts that as a delivery attempt. A burst therefore
# spends attempts on messages that never ran; max_delivery_attempts (default 100, Pub/Sub's
# maximum) and the retry backoff give a refused message hours before it is dead-lettered,
# while a message that really fails is still recorded with its error on the last attempt
# (shared/runtime/functions.py reads RAGBUS_MAX_DELIVERY_ATTEMPTS).
#
# The endpoint path /projects/<p>/topics/<t> lets functions-framework, which turns the raw
# push envelope into a CloudEvent, name the topic as the event's source. The OIDC token's
# audience is the function's base URL (what Cloud Run checks).
resource "google_pubsub_subscription" "consumer" {
  for_each = local.consumers
  name     = each.key
  topic    = google_pubsub_topic.topic[each.value.topic].id
  labels   = var.labels

  ack_deadline_seconds       = local.functions[each.value.function].timeout
  message_retention_duration = "604800s"

  push_config {
    push_endpoint = "${google_cloudfunctions2_function.function[each.value.function].service_config[0].uri}/projects/${var.project}/topics/${each.value.topic}"
    oidc_token {
      service_account_email = google_service_account.push_invoker.email
      audience              = google_cloudfunctions2_function.function[each.value.function].service_config[0].uri
    }
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter[each.value.topic].id
    max_delivery_attempts = var.max_delivery_attempts
  }

  retry_policy {
    minimum_backoff = coalesce(var.retry_minimum_backoff, local.consumer_backoff[each.key].minimum)
    maximum_backoff = coalesce(var.retry_maximum_backoff, local.consumer_backoff[each.key].maximum)
  }

  # A subscription that sees no traffic for 31 days must not disappear.
  expiration_policy {
    ttl = ""
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.push_invoker,
    google_service_account_iam_member.pubsub_agent_mints_push_tokens,
  ]
}

# Every dead-letter topic pushes to the dead-letters function, which records the dead
# letter (reason, delivery count from Pub/Sub's CloudPubSubDeadLetterSource* attributes)
# and ends its query as failed, so no query waits for its deadline on a message nobody
# will handle. Named dead_letters.<dead-letter topic>; the endpoint path names the
# dead-letter topic. No dead-letter policy of its own: a dead letter that cannot be
# recorded is retried until the message's retention ends.
resource "google_pubsub_subscription" "dead_letter_recorder" {
  for_each = toset(local.topics)
  name     = "dead_letters.${each.value}-dead-letter"
  topic    = google_pubsub_topic.dead_letter[each.value].id
  labels   = var.labels

  ack_deadline_seconds       = local.functions["dead-letters"].timeout
  message_retention_duration = "604800s"

  push_config {
    push_endpoint = "${google_cloudfunctions2_function.function["dead-letters"].service_config[0].uri}/projects/${var.project}/topics/${each.value}-dead-letter"
    oidc_token {
      service_account_email = google_service_account.push_invoker.email
      audience              = google_cloudfunctions2_function.function["dead-letters"].service_config[0].uri
    }
  }

  retry_policy {
    minimum_backoff = coalesce(var.retry_minimum_backoff, local.retry_backoff.ingestion.minimum)
    maximum_backoff = coalesce(var.retry_maximum_backoff, local.retry_backoff.ingestion.maximum)
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.push_invoker,
    google_service_account_iam_member.pubsub_agent_mints_push_tokens,
  ]
}

# What Pub/Sub itself needs to dead-letter: publish to the dead-letter topics and
# subscribe to (acknowledge on) the source subscriptions.
resource "google_pubsub_topic_iam_member" "pubsub_agent_dead_letter_publisher" {
  for_each = google_pubsub_topic.dead_letter
  topic    = each.value.id
  role     = "roles/pubsub.publisher"
  member   = local.pubsub_service_agent
}

resource "google_pubsub_subscription_iam_member" "pubsub_agent_source_subscriber" {
  for_each     = google_pubsub_subscription.consumer
  subscription = each.value.id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}
