"""A tenant's connect page (`/t/<slug>/connect`, AMB-63, AMB-64).

page: the view (MCP URL, the list results of both eras from the dispatcher); configs: the client
configurations and scripts it shows.
"""
