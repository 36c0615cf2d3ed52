#!/bin/sh
# A stand-in model for `switchboard --sampling-command`: reads the sampling request's params
# (JSON) on stdin and answers with a CreateMessageResult that says how many bytes it read.
bytes=$(wc -c | tr -d ' ')
printf '{"role":"assistant","content":{"type":"text","text":"sampled %s bytes"},"model":"test-model","stopReason":"endTurn"}\n' "$bytes"
