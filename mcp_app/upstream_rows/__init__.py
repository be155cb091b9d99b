"""The rows of upstream MCP servers (models.py), beside the app's models.py that imports them."""
