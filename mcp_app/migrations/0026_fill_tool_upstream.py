"""Fill Tool.upstream from what named the upstream before (AMB-310): the remote tool row linking the
tool (UpstreamTool.tool -> upstream) first, else the name in its handler_config, within its tenant.
A resolved tool's configuration no longer carries the name; an unresolved one keeps it (the catalog
leaves such a tool out, as it did). Backwards: the name goes back into the configuration."""

from django.db import migrations

KEY = "upstream"


def fill_upstream(apps, schema_editor) -> None:
    Tool = apps.get_model("mcp_app", "Tool")
    Upstream = apps.get_model("mcp_app", "Upstream")
    UpstreamTool = apps.get_model("mcp_app", "UpstreamTool")
    linked = dict(UpstreamTool.objects.filter(tool__isnull=False).values_list("tool_id", "upstream_id"))
    by_name = {(t, n): pk for pk, t, n in Upstream.objects.values_list("pk", "tenant_id", "name")}
    for tool in Tool.objects.filter(handler="upstream", upstream__isnull=True).iterator():
        config = tool.handler_config if isinstance(tool.handler_config, dict) else {}
        upstream_id = linked.get(tool.pk) or by_name.get((tool.tenant_id, config.get(KEY)))
        if upstream_id is None:
            continue
        rest = {key: value for key, value in config.items() if key != KEY}
        Tool.objects.filter(pk=tool.pk).update(upstream_id=upstream_id, handler_config=rest)


def name_again(apps, schema_editor) -> None:
    Tool = apps.get_model("mcp_app", "Tool")
    for tool in Tool.objects.filter(upstream__isnull=False).select_related("upstream").iterator():
        config = {KEY: tool.upstream.name, **(tool.handler_config or {})}
        Tool.objects.filter(pk=tool.pk).update(handler_config=config, upstream=None)


class Migration(migrations.Migration):

    dependencies = [
        ("mcp_app", "0025_tool_upstream_reference"),
    ]

    operations = [
        migrations.RunPython(fill_upstream, name_again),
    ]
