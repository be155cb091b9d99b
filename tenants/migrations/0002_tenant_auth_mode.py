# Every tenant that existed before OAuth was reachable without a token: they stay public (a silent
# switch would lock out every configured client); tenants created from now on default to oauth.

from django.db import migrations, models

CHOICES = [("oauth", "OAuth (bearer token of a member required)"), ("public", "Public (no authorization)")]
HELP = (
    "OAuth: every MCP request needs a bearer token issued to a member for this endpoint. "
    "Public: anyone who can reach the endpoint may use it."
)


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="auth_mode",
            field=models.CharField(choices=CHOICES, default="public", help_text=HELP, max_length=10),
        ),
        migrations.AlterField(
            model_name="tenant",
            name="auth_mode",
            field=models.CharField(choices=CHOICES, default="oauth", help_text=HELP, max_length=10),
        ),
    ]
