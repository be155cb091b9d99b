"""Row-level security on every tenant-owned table: the tenant wall behind the querysets (AMB-96).

One migration for the tables of all three apps, so the wall is switched on (and off) as one. FORCE
makes the policies bind the tables' owner too: the application may connect as the role that ran
the migrations. PostgreSQL only; on SQLite this does nothing (its querysets are the only wall).
"""

from django.db import migrations

TABLES = (
    "tenants_membership",
    "audit_auditevent",
    "mcp_app_tool",
    "mcp_app_prompt",
    "mcp_app_resource",
    "mcp_app_resourcetemplate",
    "mcp_app_historicaltool",
    "mcp_app_historicalprompt",
    "mcp_app_historicalresource",
    "mcp_app_historicalresourcetemplate",
    "mcp_app_mcpsession",
    "mcp_app_toolrun",
    "mcp_app_approvaldecision",
    "mcp_app_usagebucket",
    "mcp_app_usageerror",
)

# Inlined by the planner (one SQL expression, STABLE), so `tenant_id = ANY(...)` still uses indexes.
ALLOWS = """
CREATE OR REPLACE FUNCTION mcp_tenant_allowed(tenant bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('mcp.rls_bypass', true), '') = 'on'
        OR tenant = ANY (string_to_array(nullif(current_setting('mcp.tenants', true), ''), ',')::bigint[])
$$
"""


def wall_on(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(ALLOWS)
    for table in TABLES:
        schema_editor.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        schema_editor.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        schema_editor.execute(
            f"CREATE POLICY tenant_wall ON {table} "
            "USING (mcp_tenant_allowed(tenant_id)) WITH CHECK (mcp_tenant_allowed(tenant_id))"
        )


def wall_off(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP POLICY IF EXISTS tenant_wall ON {table}")
        schema_editor.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        schema_editor.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    schema_editor.execute("DROP FUNCTION IF EXISTS mcp_tenant_allowed(bigint)")


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_app", "0010_usage_recording"),
        ("tenants", "0007_tenant_caps"),
        ("audit", "0003_tenant_wall_bypassed"),
    ]

    operations = [migrations.RunPython(wall_on, wall_off, elidable=False)]
