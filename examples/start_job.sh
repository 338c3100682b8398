#!/usr/bin/env bash
# Start a curaflow job with the temporal CLI (a Go client): the input is the protocol Task
# as JSON, the workflow id is the job id <target>@manual-<key lowercased>.
#   curaflow dev            # in another terminal
#   bash examples/start_job.sh my-cli-job
set -euo pipefail
key="${1:-cli-$(date +%s)}"
job_id="demo@manual-${key,,}"
task=$(printf '{"protocol_version":"1","job_type":"candidate_search","idempotency_key":"%s","params":{"target_id":"demo"}}' "$key")

# Update-with-start is the idempotent start (like POST /jobs): the start carries the
# `admission` update, which answers once the Task is admitted — the same Task again is the
# same job, another Task under the key is refused (idempotency_conflict). RejectDuplicate
# keeps one run per job id: once the job ended, Temporal refuses the start (exit status 1)
# and the job's own `admission_answer` query answers instead (docs/temporal.md).
temporal workflow execute-update-with-start --address 127.0.0.1:7233 \
  --update-name admission --workflow-id "$job_id" --type JobWorkflow --task-queue curaflow \
  --id-conflict-policy UseExisting --id-reuse-policy RejectDuplicate --execution-timeout 7d --task-timeout 5s \
  --input "$task" --update-input "$task"
# Wait for and print the final JobState (status, cells, deliveries).
temporal workflow result --address 127.0.0.1:7233 -w "$job_id"

# While it runs, from another terminal:
#   temporal workflow query  -w "$job_id" --type status     # the live state
#   temporal workflow signal -w "$job_id" --name cancel     # cancel (or: temporal workflow cancel -w "$job_id")
