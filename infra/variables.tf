variable "project" {
  description = "Google Cloud project id"
  type        = string
}

variable "region" {
  description = "Region for functions, buckets, Scheduler and Eventarc (the documents bucket must be in the trigger's region)"
  type        = string
  default     = "europe-west4"
}

variable "max_delivery_attempts" {
  description = "Deliveries before a message goes to its dead-letter topic (Pub/Sub allows 5-100). Cloud Run's 429 when no instance is free counts as one, so a burst spends attempts on work that never ran: 100 keeps it (docs/google-cloud.md: Delivery under load)"
  type        = number
  default     = 100

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub accepts max_delivery_attempts between 5 and 100."
  }
}

variable "retry_minimum_backoff" {
  description = "Shortest wait before Pub/Sub redelivers a message the function failed or refused, for every subscription; null (the default) keeps each its own (local.retry_backoff: 10s for ingestion, 1s for the query loop)"
  type        = string
  default     = null
}

variable "retry_maximum_backoff" {
  description = "Longest wait before Pub/Sub redelivers a message the function failed or refused, for every subscription; null (the default) keeps each its own (local.retry_backoff: 600s for ingestion, 60s for the query loop)"
  type        = string
  default     = null
}

variable "source_archive" {
  description = <<-EOT
    Path to a prebuilt zip of the repository root (main.py, shared/, services/, requirements.txt).
    Empty (the default): Terraform zips the repository root itself with data.archive_file,
    leaving out tests, virtualenvs, caches, docs and infra (see local.source_excludes).
  EOT
  type        = string
  default     = ""
}

variable "firestore_database" {
  description = "Firestore database id; '(default)' needs no setting in the code, any other name is passed as RAGBUS_FIRESTORE_DATABASE"
  type        = string
  default     = "(default)"
}

variable "adopt_firestore_database" {
  description = "true when var.firestore_database already exists in the project (every project has a '(default)' database once Firestore was used): Terraform imports it instead of failing with 409 on create. Its location and type must then match firestore_location and FIRESTORE_NATIVE."
  type        = bool
  default     = false
}

variable "firestore_location" {
  description = "Firestore location (a multi-region such as eur3 / nam5, or a region)"
  type        = string
  default     = "eur3"
}

variable "embedder" {
  description = "Embedder of the gcp runtime (RAGBUS_EMBEDDER): 'local' (the packaged all-MiniLM-L6-v2, 384 dimensions, in process) or 'genai' (RAGBUS_EMBED_MODEL on Vertex AI)"
  type        = string
  default     = "local"

  validation {
    condition     = contains(["local", "genai"], var.embedder)
    error_message = "embedder must be 'local' or 'genai'."
  }
}

variable "embed_model" {
  description = "Embedding model when embedder = 'genai' (RAGBUS_EMBED_MODEL)"
  type        = string
  default     = "gemini-embedding-001"
}

variable "embedding_dimension" {
  description = "Dimension of the chunk embeddings (RAGBUS_EMBED_DIMENSION): 384 for the packaged MiniLM; for 'genai' the output dimensionality asked of the model (e.g. 768). The Firestore vector index only serves vectors of exactly this size."
  type        = number
  default     = 384
}

variable "pdf_reader" {
  description = "Who reads PDFs (RAGBUS_PDF_READER): 'local' (PDFium, and OCR where the engine is installed, in the cleaner) or 'documentai' (Document AI's layout parser: documentai.tf creates the processor, and Google bills its pages; docs/google-cloud.md, 'PDFs read by Document AI')"
  type        = string
  default     = "local"

  validation {
    condition     = contains(["local", "documentai"], var.pdf_reader)
    error_message = "pdf_reader must be 'local' or 'documentai'."
  }
}

variable "documentai_location" {
  description = "Where the layout parser processor lives and processes the documents (RAGBUS_DOCUMENTAI_LOCATION), pdf_reader = 'documentai': 'us' or 'eu'"
  type        = string
  default     = "us"

  validation {
    condition     = contains(["us", "eu"], var.documentai_location)
    error_message = "documentai_location must be 'us' or 'eu'."
  }
}

variable "index_backend" {
  description = "Where chunk vectors are searched (RAGBUS_INDEX): 'firestore' (vector index on chunks.embedding), 'vertex' (Vertex AI Vector Search: an index, a public endpoint and a deployed index, vertex.tf; hybrid dense + sparse queries), or empty (the default): chosen by cost, Firestore while its vector index reads at expected_chunks and expected_questions_per_day cost at most max_index_read_usd_per_day, else Vertex AI Vector Search (docs/capacity.md, 'The index choice')"
  type        = string
  default     = ""

  validation {
    condition     = contains(["", "firestore", "vertex"], var.index_backend)
    error_message = "index_backend must be empty (chosen by cost), 'firestore' or 'vertex'."
  }
}

variable "expected_chunks" {
  description = "The corpus this deployment is sized for, in chunks (~10 a document): with expected_questions_per_day, what Firestore's vector index reads would cost (each query reads every entry, billed one read per 100)"
  type        = number
  default     = 100000

  validation {
    condition     = var.expected_chunks >= 0
    error_message = "expected_chunks must be 0 or more."
  }
}

variable "expected_questions_per_day" {
  description = "Questions a day this deployment is sized for (the index choice's cost, docs/capacity.md)"
  type        = number
  default     = 1000

  validation {
    condition     = var.expected_questions_per_day >= 0
    error_message = "expected_questions_per_day must be 0 or more."
  }
}

variable "max_index_read_usd_per_day" {
  description = "The stated bound of the index choice (bench/data/capacity/bounds.json): Firestore is chosen, or accepted when named, only while its vector index reads cost at most this many US dollars a day"
  type        = number
  default     = 20
}

variable "vertex_index_machine_type" {
  description = "Machine type serving the deployed Vector Search index (index_backend = 'vertex')"
  type        = string
  default     = "e2-standard-2"
}

variable "vertex_index_replicas" {
  description = "Minimum and maximum replicas of the deployed Vector Search index (index_backend = 'vertex')"
  type        = object({ min = number, max = number })
  default     = { min = 1, max = 2 }
}

variable "query_retention_days" {
  description = "Days a query record is kept: the query-state code sets expire_at = created_at + this, and Firestore TTL deletes the record after it"
  type        = number
  default     = 30
}

variable "tombstone_retention_days" {
  description = "Days the record a delete leaves is kept once the delete is carried out (at least 7): the indexer sets the tombstone's expire_at, and Firestore TTL deletes it after it; a tombstone a dead letter names is kept"
  type        = number
  default     = 30
}

variable "openai_base_url" {
  description = "llm_provider = \"openai\": the server's API base as the OpenAI SDK takes it (RAGBUS_OPENAI_BASE_URL), e.g. https://llm.example.com/v1; the functions reach it over the internet (or a VPC connector you add)"
  type        = string
  default     = ""

  validation {
    condition     = var.openai_base_url == "" || can(regex("^https?://[^/?#]+", var.openai_base_url))
    error_message = "openai_base_url must be an http(s) URL such as https://llm.example.com/v1."
  }
  validation {
    # A key in the URL would sit in the functions' plain environment: use openai_api_key_secret.
    condition     = !can(regex("^https?://[^/?#]*@", var.openai_base_url))
    error_message = "openai_base_url must not carry user:password; put the key in Secret Manager and name it in openai_api_key_secret."
  }
  validation {
    # Nor in a query (?key=...), which every request would also carry after its path; the code refuses both.
    condition     = !can(regex("[?#]", var.openai_base_url))
    error_message = "openai_base_url must not carry a query or fragment (?... or #...): the API base is scheme, host and path, e.g. https://llm.example.com/v1; put a key in Secret Manager and name it in openai_api_key_secret."
  }
}

variable "openai_model" {
  description = "llm_provider = \"openai\": a model the server serves, one of the ids GET <base>/models lists (RAGBUS_OPENAI_MODEL)"
  type        = string
  default     = ""
}

variable "gateway_api_token_secret" {
  description = "The Secret Manager secret (its id, in var.project) holding the gateway's API token, given to the gateway as RAGBUS_API_TOKEN: REST and MCP callers then send Authorization: Bearer <token>, and their Cloud Run identity token as X-Serverless-Authorization. Empty: IAM alone guards the gateway."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{0,255}$", var.gateway_api_token_secret))
    error_message = "gateway_api_token_secret is a secret's id in var.project (letters, digits, - and _), not its full resource name."
  }
}

variable "openai_api_key_secret" {
  description = "llm_provider = \"openai\": the Secret Manager secret (its id, in var.project) holding the server's API key, given to the model-calling functions as RAGBUS_OPENAI_API_KEY; empty for a server that wants no key. Its latest version is read at each cold start."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{0,255}$", var.openai_api_key_secret))
    error_message = "openai_api_key_secret is a secret's id in var.project (letters, digits, - and _), not its full resource name."
  }
}

variable "openai_timeout_s" {
  description = "llm_provider = \"openai\": one model call's time limit in seconds (RAGBUS_OPENAI_TIMEOUT_S); keep it under the model functions' timeouts"
  type        = number
  default     = 60

  validation {
    condition     = var.openai_timeout_s > 0
    error_message = "openai_timeout_s must be a positive number of seconds."
  }
}

variable "gemini_model" {
  description = "Gemini model used by transformer, grader and synthesizer; empty means the code's default (DEFAULT_GEMINI_MODEL in shared/contract/config.py)"
  type        = string
  default     = ""
}

variable "vertex_location" {
  description = "Region of the Vector Search index and of regional embedding models such as gemini-embedding-001 (GOOGLE_CLOUD_LOCATION); empty means var.region. Gemini itself is placed by gemini_location."
  type        = string
  default     = ""
}

variable "gemini_location" {
  description = "Vertex AI location the Gemini model is served from (RAGBUS_GEMINI_LOCATION): 'global', the 'us' / 'eu' multi-regions, or a region for a model regional endpoints serve. Empty (the default) means 'eu' when region is a europe-* region (processing stays in the EU) and 'global' otherwise. Each model's locations are the table in shared/contract/gemini_locations.json; the plan refuses a location the table says does not serve gemini_model."
  type        = string
  default     = ""

  validation {
    condition     = var.gemini_location == "" || contains(["global", "us", "eu"], var.gemini_location) || can(regex("^[a-z]+-[a-z]+[0-9]+$", var.gemini_location))
    error_message = "gemini_location must be empty, 'global', 'us', 'eu' or a region name."
  }
}

variable "gemini_timeout_s" {
  description = "llm_provider = \"gemini\": one HTTP attempt's time limit in seconds (RAGBUS_GEMINI_TIMEOUT_S); the SDK makes up to 3 attempts, and all of them must end before the model functions' timeouts"
  type        = number
  default     = 40

  validation {
    condition     = var.gemini_timeout_s > 0
    error_message = "gemini_timeout_s must be a positive number of seconds."
  }
}

variable "feed_poll_schedule" {
  description = "Cron schedule of the FeedPollRequested the scheduler publishes (every registered feed is polled)"
  type        = string
  default     = "*/15 * * * *"
}

variable "feed_poll_time_zone" {
  description = "Time zone of feed_poll_schedule"
  type        = string
  default     = "Etc/UTC"
}

variable "allow_unauthenticated_gateway" {
  description = "Let anyone on the internet call the gateway (grants run.invoker to allUsers). Off by default: callers need an identity token."
  type        = bool
  default     = false
}

variable "gateway_invokers" {
  description = "Principals allowed to call the gateway, e.g. [\"group:rag-users@example.com\"]"
  type        = list(string)
  default     = []
}

variable "gateway_min_instances" {
  description = "Warm gateway instances (0 scales to zero; 1 avoids a cold start on the first question)"
  type        = number
  default     = 0
}

variable "max_instances" {
  description = "Per-function override of the maximum instance count, keyed by function name (e.g. { cleaner = 20 })"
  type        = map(number)
  default     = {}
}

variable "labels" {
  description = "Labels put on every labelled resource"
  type        = map(string)
  default     = { app = "ragbus" }
}
