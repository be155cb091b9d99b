"""The bottom of the project: what every layer may read, importing nothing of the project itself.

`nesting` is the one nesting limit of every JSON and YAML read (AMB-115); `formfields` the form fields
every admin shares (AMB-70), with its editor's syntax worker `ace_worker` (AMB-233). Beside tenants/,
audit/ and mcp_app/, below all of them, as healthchecks' `hc/lib/` is (AMB-320).
"""
