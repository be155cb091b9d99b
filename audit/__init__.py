"""The audit trail of security-relevant events: `audit.trail.record` writes one, nothing else does."""
