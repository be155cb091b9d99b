"""The OpenAPI schema's shared parts: every operation's error responses, the bearer token scheme."""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema

from mcp_app.api.errors import ErrorSerializer

# Status → when it answers; every error body is ErrorSerializer.
ERRORS = {
    "400": "Invalid request: fields names each wrong field.",
    "401": "No valid session or `manage` bearer token (an MCP endpoint's token is refused).",
    "403": "Your role in this tenant does not allow it (viewers read only), or the CSRF token is missing.",
    "404": "No such tenant or object, or one you may not see (the same answer).",
    "405": "The method is not allowed here.",
    "406": "The Accept header names no type the API serves.",
}
WITH_BODY = {"415": "The request body's Content-Type is not JSON or multipart form data."}


class ApiSchema(AutoSchema):
    """drf-spectacular's AutoSchema with the one error shape documented on every operation."""

    def _get_response_bodies(self, direction: Literal["request", "response"] = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        errors = {**ERRORS, **(WITH_BODY if self.method in ("POST", "PUT", "PATCH") else {})}
        for code, description in errors.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code, direction=direction)
                responses[code]["description"] = description
        return responses


class ManageTokenScheme(OpenApiAuthenticationExtension):
    target_class = "mcp_app.api.authentication.ManageTokenAuthentication"
    name = "manageToken"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An access token with the `manage` scope whose audience is this API "
            "(`manage.py api_token <username>`). MCP endpoint tokens are refused.",
        }
