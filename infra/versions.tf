terraform {
  # 1.7: import blocks with for_each (firestore.tf adopts an existing database).
  required_version = ">= 1.7"
  required_providers {
    # One major version: 7.x (a new major may rename or remove arguments; upgrade on purpose).
    google = {
      source  = "hashicorp/google"
      version = "~> 7.0"
    }
    # Builds the one source archive every function deploys from (glob excludes need 2.5).
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.5"
    }
  }
  # State lives in a bucket given at init time:
  #   terraform init -backend-config="bucket=<state bucket>" -backend-config="prefix=ragbus"
  backend "gcs" {}
}

provider "google" {
  project = var.project
  region  = var.region
}
