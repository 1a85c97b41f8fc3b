"""The Cloud Run job the handler starts once per scheduled run (target = cloud_run_job).

    python -m cloud_run_job run               one task: CLOUD_RUN_TASK_INDEX of CLOUD_RUN_TASK_COUNT, run DEDUP_RUN_ID
    python -m cloud_run_job watchdog [--reset] items whose holder died (expired lease); --reset requeues them
    python -m cloud_run_job verify RUN_ID      exactly one output per item of the input snapshot, or exit 1

task.py runs a task (partition, stages, checkpoints, put-if-absent outputs), stages.py is the work
(your room), store.py is the only module that touches Firestore, holders.py the only one that reads
the Run API (has the execution that holds an item's lease ended?).
"""
