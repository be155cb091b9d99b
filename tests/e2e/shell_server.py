"""A long-lived `manage.py shell` for the end-to-end tests: run as `python -m tests.e2e.shell_server`.

The e2e tests set up their tenants with Python run in another process than any server (as an owner's
admin or an import would). One `manage.py shell -c` per snippet spent ~3 s of CPU importing the
project each time; this process imports it once and runs snippet after snippet, each as
`manage.py shell -c` would (the tenant wall bypassed as for every command, Django's automatic
imports, a fresh namespace), its database connections closed after each so none outlives a snippet.

Protocol on stdin/stdout, one JSON object a line: `{"code": ...}` in, `{"ok", "out", "err"}` out.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
    # The channel the answers travel on: a snippet's own prints are captured, never written here.
    channel = sys.stdout
    sys.stdout = sys.stderr

    import django  # noqa: PLC0415 - after the settings module is chosen, as manage.py does

    from tenants import wall  # noqa: PLC0415 - likewise

    wall.bypass_process("manage.py shell")
    django.setup()
    from django.core.management.commands import shell  # noqa: PLC0415 - needs the app registry
    from django.db import connections  # noqa: PLC0415 - likewise

    namespace = {**vars(shell), **shell.Command().get_namespace(verbosity=0)}
    print(json.dumps({"ready": True}), file=channel, flush=True)
    for line in sys.stdin:
        code = json.loads(line)["code"]
        out, err = io.StringIO(), io.StringIO()
        ok = True
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                exec(code, dict(namespace))  # noqa: S102 - the tests' own set-up code, as `shell -c` runs it
        except BaseException:  # noqa: BLE001 - reported to the test, which raises it there
            ok = False
            err.write(traceback.format_exc())
        finally:
            connections.close_all()
        print(json.dumps({"ok": ok, "out": out.getvalue(), "err": err.getvalue()}), file=channel, flush=True)


if __name__ == "__main__":
    main()
