"""The self-check (issue 24, AMB-240..246): what would a client trip over in this tenant?

``checks`` (no network: per definition, on save too), ``runner`` (the tenant's endpoint in every
revision, then the checks that reach out) and ``report`` (findings per definition, severity, fix link).
The admin's page (admin/self_check.py), the API (api/self_check.py) and ``manage.py check_tenant`` show it.
"""
