#!/usr/bin/env bash
# Start a curaflow job with the temporal CLI (a Go client): the input is the protocol Task
# as JSON, the workflow id is the job id <target>@manual-<key lowercased>.
#   curaflow dev            # in another terminal
#   bash examples/start_job.sh my-cli-job
set -euo pipefail
key="${1:-cli-$(date +%s)}"
job_id="demo@manual-${key,,}"
task=$(printf '{"protocol_version":"1","job_type":"candidate_search","idempotency_key":"%s","params":{"target_id":"demo"}}' "$key")

# `execute` starts it and waits; it prints the final JobState (status, cells, deliveries).
temporal workflow execute --address 127.0.0.1:7233 --type JobWorkflow --task-queue curaflow \
  --workflow-id "$job_id" --id-conflict-policy UseExisting --id-reuse-policy AllowDuplicateFailedOnly \
  --execution-timeout 7d --task-timeout 5s --input "$task" --output json

# While it runs, from another terminal:
#   temporal workflow query  -w "$job_id" --name status     # the live state
#   temporal workflow signal -w "$job_id" --name cancel     # cancel (or: temporal workflow cancel -w "$job_id")
