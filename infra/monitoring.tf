# One dashboard: executions, errors and latency of every function; Pub/Sub backlog and
# dead-lettering; and the OpenTelemetry metrics the stages export (workload.googleapis.com/
# ragbus.*: queries by outcome, refinements, stage duration, ingested chunks, dead letters,
# answers rated up/down per outcome).
# The layout is plain JSON in dashboard.json (tests read it; the console can export edits
# back into it).

resource "google_monitoring_dashboard" "ragbus" {
  dashboard_json = file("${path.module}/dashboard.json")

  depends_on = [google_project_service.api]
}
