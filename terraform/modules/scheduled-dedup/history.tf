# The schedules this apply deploys, for the audit's schedule history (the baked audit.py, "dated").
# An apply that changes any job's cron, zone, dst_gap or pause writes one document in the runs
# collection (ledger.DEPLOYED_ID): each Scheduler job's schedule, and two instants that bracket the
# apply's change of the Scheduler jobs and the function. Without it the audit can only date a change
# somewhere between the two audits around it, and a run missed just before a pause inside that
# interval would be reported paused.

locals {
  # Keyed and shaped as the audit's eras (audit.ERA_FIELDS), by Scheduler job name.
  deployed_schedules = {
    for id, job in var.jobs : "${var.slug}-${id}" => {
      cron      = job.schedule
      time_zone = job.time_zone
      dst_gap   = job.dst_gap
      paused    = job.paused
    }
  }
}

# Taken before the function and the Scheduler jobs change (they follow it), anew whenever a
# schedule changes. An apply that fails after it keeps it in the state: the retried apply's bracket
# then starts at the first attempt, still before the change.
resource "time_static" "schedules_changing" {
  triggers = { schedules = jsonencode(local.deployed_schedules) }
}

# Taken once the Scheduler jobs and the function hold the new schedules.
resource "time_static" "schedules_changed" {
  triggers = { schedules = jsonencode(local.deployed_schedules) }

  depends_on = [google_cloud_scheduler_job.this, google_cloudfunctions2_function.this]
}

resource "google_firestore_document" "deployed_schedules" {
  project     = var.project_id
  database    = local.firestore_database
  collection  = var.firestore.collection
  document_id = "schedules-deployed" # ledger.DEPLOYED_ID
  # Firestore's REST Value JSON (projects.databases.documents); instants as RFC 3339 strings.
  fields = jsonencode({
    from = { stringValue = time_static.schedules_changing.rfc3339 }
    seen = { stringValue = time_static.schedules_changed.rfc3339 }
    jobs = { mapValue = { fields = {
      for name, job in local.deployed_schedules : name => { mapValue = { fields = {
        cron      = { stringValue = job.cron }
        time_zone = { stringValue = job.time_zone }
        dst_gap   = { stringValue = job.dst_gap }
        paused    = { booleanValue = job.paused }
      } } }
    } } }
  })
}
