"""Drafts and publishing of a tenant's definitions (AMB-218..222): `service.py`."""
