"""Small helpers several packages share, each defined once: canonical JSON, reading an input file, the
JSONL line reader, the LIKE escape, the p95 latency statistic, the ``with`` statement for closable objects
(``closing``), a dataclass's JSON-ready fields (``fields``), the timezone rule (``moments``) and the JSON
HTTP endpoint with its clients' shared part (``http``, ``endpoint``). Nothing here imports another ragstore
package but ``ragstore.errors``."""
