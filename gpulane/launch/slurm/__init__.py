"""The Slurm launcher: settings, the task every rank runs, the job's monitor, the
diagnosis of a failed job, and the launcher itself (submit through submitit)."""
