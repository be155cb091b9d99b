"""The app's ORM models, one module per concept; Django finds them here, through `mcp_app.models`.

`definitions`: tools, prompts, resources, templates; `upstreams`: upstream MCP servers, their tools and
health; `connections`: connected accounts' providers and connections; `sessions`: the MCP session record;
`policies`: who may use what (AMB-347); `guardrails`: what may flow in and out (AMB-354); `governance`: the events of their decisions (AMB-355); `quotas`: how often (AMB-352); `runs`: background runs and approval decisions; `usage`: usage buckets and errors; `tokens`: API tokens; `versioned`: the drafts and versions every definition and governance rule shares (AMB-362).
Every model keeps its app label (mcp_app) and table: moving a model between these modules is no migration.
"""

from mcp_app.models.connections import Connection, Provider
from mcp_app.models.definitions import (
    MAX_UPLOAD_BYTES,
    UPSTREAM_NAME_KEY,
    WORKER_WAIT_MAX_SECONDS,
    Approval,
    Definition,
    Execution,
    Prompt,
    Resource,
    ResourceTemplate,
    TaskSupport,
    Tool,
    ToolQuerySet,
    WithoutElicitation,
    default_input_schema,
    prompt_name_validator,
    scope_token_validator,
    tool_name_validator,
)
from mcp_app.models.governance import EventKind, GovernanceEvent
from mcp_app.models.guardrails import Guardrail
from mcp_app.models.policies import AppliesTo, Effect, Policy
from mcp_app.models.quotas import Quota
from mcp_app.models.runs import ApprovalDecision, ToolRun
from mcp_app.models.sessions import McpSession, McpSessionQuerySet
from mcp_app.models.tokens import ApiToken
from mcp_app.models.upstreams import (
    UPSTREAM_SETTINGS,
    Upstream,
    UpstreamCircuit,
    UpstreamHealth,
    UpstreamMode,
    UpstreamTool,
    UpstreamTransport,
)
from mcp_app.models.usage import LATENCY_BOUNDS_MS, LATENCY_FIELDS, UsageBucket, UsageError
from mcp_app.models.versioned import Versioned, VersionedQuerySet

__all__ = [
    "LATENCY_BOUNDS_MS",
    "LATENCY_FIELDS",
    "MAX_UPLOAD_BYTES",
    "UPSTREAM_NAME_KEY",
    "UPSTREAM_SETTINGS",
    "WORKER_WAIT_MAX_SECONDS",
    "ApiToken",
    "AppliesTo",
    "Approval",
    "ApprovalDecision",
    "Connection",
    "Definition",
    "Effect",
    "EventKind",
    "Execution",
    "GovernanceEvent",
    "Guardrail",
    "McpSession",
    "McpSessionQuerySet",
    "Policy",
    "Prompt",
    "Provider",
    "Quota",
    "Resource",
    "ResourceTemplate",
    "TaskSupport",
    "Tool",
    "ToolQuerySet",
    "ToolRun",
    "Upstream",
    "UpstreamCircuit",
    "UpstreamHealth",
    "UpstreamMode",
    "UpstreamTool",
    "UpstreamTransport",
    "UsageBucket",
    "UsageError",
    "Versioned",
    "VersionedQuerySet",
    "WithoutElicitation",
    "default_input_schema",
    "prompt_name_validator",
    "scope_token_validator",
    "tool_name_validator",
]
