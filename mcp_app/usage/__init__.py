"""Usage recording (counted in memory, flushed to the database) and the per-tenant usage dashboard.

recorder: the request path's only part (no I/O); flush: the periodic write; live: open sessions and
listeners; queries and charts: the dashboard's reading and drawing; views: the pages.
"""
