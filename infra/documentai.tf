# Document AI's layout parser, when var.pdf_reader = "documentai" (RAGBUS_PDF_READER=documentai):
# the cleaner sends each PDF to this processor in pieces of at most 15 pages (the online limit,
# docs/google-cloud.md "PDFs read by Document AI") and maps its layout blocks to the passages
# and pages the local reader yields (shared/adapters/gcp/document_ai.py). The functions get the
# processor's full name (functions.tf); the cleaner alone holds roles/documentai.apiUser (iam.tf).
# The processor serves its default (stable) version; Google bills the pages it reads.

resource "google_document_ai_processor" "layout" {
  count        = var.pdf_reader == "documentai" ? 1 : 0
  location     = var.documentai_location
  display_name = "ragbus-layout-parser"
  type         = "LAYOUT_PARSER_PROCESSOR"

  depends_on = [google_project_service.api]
}
