"""The history of tenant definitions (AMB-60..62).

service: versions with per-field diffs, revert and restore, read by the admin's history pages
(admin/history.py) and the API (api/history.py).
"""
