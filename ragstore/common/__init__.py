"""Small helpers several packages share, each defined once: canonical JSON, reading an input file, the
JSONL line reader, the LIKE escape and the p95 latency statistic. Nothing here imports another ragstore
package but ``ragstore.errors``."""
