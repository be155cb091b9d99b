"""What operators and their tools read: the probes and the Prometheus metrics (AMB-79..86, AMB-113).

health: `/health/live` and `/health/ready` (django-health-check); metrics: `/metrics`.
"""
