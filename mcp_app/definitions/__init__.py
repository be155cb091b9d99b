"""Definitions as the models hold them: each row's checks, its fields' schemas applied (AMB-143).

``checks`` runs the one schema of each JSON field (mcp_app/content/fields.schema.json) and what a
schema cannot say (a JSON Schema checked by the dialect it names, URI templates, names that must
differ, a handler kind's own rules), listing every problem per field. Above handlers (a handler
configuration is checked by its kind), below the models, which call it from ``clean()``.
"""
