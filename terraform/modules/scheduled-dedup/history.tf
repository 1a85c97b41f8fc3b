# When the last apply changed the schedules, for the audit's schedule history (the baked audit.py, "dated").
# Two instants bracket an apply's change of the function and the Scheduler jobs; the audit's own Scheduler
# job, updated after both, carries them with a digest of the schedules on every delivery (header
# X-Schedules-Deployed, audit.tf). Without it the audit can only date a change somewhere between the two
# audits around it, and a run missed just before a pause inside that interval would be reported paused.
# A header, not a document: the planner reads no Firestore data (terraform/bootstrap), and a plan refreshes
# a document it manages.

locals {
  # One line per Scheduler job, sorted by name: "<name>|<cron>|<zone>|<dst_gap>|paused or enabled". The baked
  # audit.schedules_digest hashes the function's config.yaml the same way; equal digests mean this apply
  # deployed the schedules the function holds.
  deployed_schedules = join("\n", [
    for id in sort(keys(var.jobs)) : join("|", [
      "${var.slug}-${id}", var.jobs[id].schedule, var.jobs[id].time_zone, var.jobs[id].dst_gap,
      var.jobs[id].paused ? "paused" : "enabled",
    ])
  ])
  schedules_deployed = join(" ", [
    time_static.schedules_changing.rfc3339, time_static.schedules_changed.rfc3339, sha256(local.deployed_schedules),
  ])
}

# Taken before the function and the Scheduler jobs change (they follow it), anew whenever a schedule
# changes. An apply that fails after it keeps it in the state: the retried apply's bracket then starts at
# the first attempt, still before the change.
resource "time_static" "schedules_changing" {
  triggers = { schedules = local.deployed_schedules }
}

# Taken once the function and the Scheduler jobs hold the new schedules.
resource "time_static" "schedules_changed" {
  triggers = { schedules = local.deployed_schedules }

  depends_on = [module.scheduler_jobs, google_cloudfunctions2_function.this]
}
