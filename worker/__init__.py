"""The worker process: composition root for activities, workflows and schedules."""
