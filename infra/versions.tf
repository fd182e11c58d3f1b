terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 5.30"
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
