#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
    # After the settings module is chosen, as Django's own manage.py does.
    from django.core.management import execute_from_command_line  # noqa: PLC0415

    from tenants import wall  # noqa: PLC0415 - after the settings module is chosen

    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command != "runserver":  # a development server serves requests: each sets its own scope
        # Commands (migrate, seed_demo, import_tenant, ...) work across tenants: the operator's, on purpose.
        wall.bypass_process(f"manage.py {command}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
