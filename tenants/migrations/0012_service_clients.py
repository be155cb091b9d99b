"""Service clients (AMB-197), behind the tenant wall (AMB-96) with the policy function of mcp_app's 0011."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


TABLE = "tenants_serviceclient"


def wall_on(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY")
    schema_editor.execute(f"ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY")
    schema_editor.execute(
        f"CREATE POLICY tenant_wall ON {TABLE} "
        "USING (mcp_tenant_allowed(tenant_id)) WITH CHECK (mcp_tenant_allowed(tenant_id))"
    )


def wall_off(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP POLICY IF EXISTS tenant_wall ON {TABLE}")
    schema_editor.execute(f"ALTER TABLE {TABLE} NO FORCE ROW LEVEL SECURITY")
    schema_editor.execute(f"ALTER TABLE {TABLE} DISABLE ROW LEVEL SECURITY")


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0011_max_sessions_help'),
        ('mcp_app', '0011_tenant_wall'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        migrations.swappable_dependency(settings.OAUTH2_PROVIDER_APPLICATION_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ServiceClient',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope', models.CharField(help_text='The scopes its tokens may carry, space-separated (the most a token gets).', max_length=1000)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('application', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='service_client', to=settings.OAUTH2_PROVIDER_APPLICATION_MODEL)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='service_clients', to='tenants.tenant')),
            ],
        ),
        migrations.RunPython(wall_on, wall_off),
    ]
