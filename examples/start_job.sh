#!/usr/bin/env bash
# Start a curaflow job with the temporal CLI (a Go client): the input is the protocol Task
# as JSON, the workflow id is the job id <target>@manual-<key lowercased>.
#   curaflow dev            # in another terminal
#   bash examples/start_job.sh my-cli-job
# Temporal at TEMPORAL_ADDRESS (the address `curaflow dev` prints), default 127.0.0.1:7233:
#   TEMPORAL_ADDRESS=127.0.0.1:17233 bash examples/start_job.sh my-cli-job
set -euo pipefail
address="${TEMPORAL_ADDRESS:-127.0.0.1:7233}"
key="${1:-cli-$(date +%s)}"
job_id="demo@manual-${key,,}"
task=$(printf '{"protocol_version":"1","job_type":"candidate_search","idempotency_key":"%s","params":{"target_id":"demo"}}' "$key")

# Update-with-start is the idempotent start (like POST /jobs): the start carries the
# `admission` update, which answers once the Task is admitted — the same Task again is the
# same job, another Task under the key is refused (idempotency_conflict). RejectDuplicate:
# once the job ended, Temporal refuses the start (nothing adds a run under the job's id),
# and the job itself answers the Task: its final state, or the refusal.
if ! temporal workflow execute-update-with-start --address "$address" \
  --update-name admission --workflow-id "$job_id" --type JobWorkflow --task-queue curaflow \
  --id-conflict-policy UseExisting --id-reuse-policy RejectDuplicate --execution-timeout 7d --task-timeout 5s \
  --input "$task" --update-input "$task"; then
  answer=$(temporal workflow query --address "$address" -w "$job_id" --type admission_answer --input "$task")
  echo "$answer"
  [[ "$answer" == *'"refusal":null'* ]]  # exit 1 when the job refused the Task
  exit
fi
# Wait for and print the final JobState (status, cells, deliveries).
temporal workflow result --address "$address" -w "$job_id"

# While it runs, from another terminal:
#   temporal workflow query  -w "$job_id" --type status     # the live state
#   temporal workflow signal -w "$job_id" --name cancel     # cancel (or: temporal workflow cancel -w "$job_id")
