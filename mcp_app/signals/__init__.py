"""mcp_app's model signal receivers, connected by McpAppConfig.ready (Django's place for them).

definitions: an edited definition bumps its tenant's version and announces list_changed /
resources/updated; audit_trail: clients, consent and tool secrets recorded in the audit trail.
"""
