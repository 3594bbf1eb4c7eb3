"""The core model every layer shares: nodes' failures, findings and outcomes (model), errors and
exit codes, captures (capture), units, node sets, JSON, whole-file writes, the flag annotation."""
