"""A tenant's policies: compiled once per definitions version (CEL) and the one decision on every list
and every call, get and read (docs/decisions/governance.md, AMB-347)."""
