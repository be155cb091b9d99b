# A `manage` token's name and last use (AMB-237): a row beside django-oauth-toolkit's AccessToken.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_app", "0023_drafts_and_versions"),
        ("oauth2_provider", "0022_refreshtoken_token_family_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "name",
                    models.CharField(help_text="What the token is for (a script, a CI pipeline).", max_length=100),
                ),
                (
                    "last_used",
                    models.DateTimeField(blank=True, help_text="Its last request (to the minute).", null=True),
                ),
                (
                    "token",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_token",
                        to="oauth2_provider.accesstoken",
                    ),
                ),
            ],
            options={"verbose_name": "API token"},
        ),
    ]
