"""The REST management API at /api/v1/ (Django REST framework): one tenant's definitions, runs,
OAuth clients, members and settings, as the caller's membership allows (tenants.access)."""
