"""The engine's tables and their one writer each: status changes, inserts, claims and leases, payloads, retention."""
