variable "project" {
  description = "Google Cloud project id"
  type        = string
}

variable "region" {
  description = "Region for functions and Firestore"
  type        = string
  default     = "europe-west4"
}

variable "max_delivery_attempts" {
  description = "Deliveries before a message goes to its dead-letter topic (Pub/Sub allows 5-100)"
  type        = number
  default     = 5
}
