"""The toolkit's private helpers we rely on are still there with the shape we use (see oauth/dot_compat)."""

from __future__ import annotations

import inspect
from importlib import import_module

import pytest

from mcp_app.oauth import dot_compat

HELPERS = {
    "application_to_response": ["application", "registration_token", "request"],
    "build_application_kwargs": ["data"],
    "check_permissions": ["request"],
    "error_response": ["error", "description"],
    "issue_registration_token": ["application"],
    "parse_metadata": ["body"],
    "validation_error_description": ["exc"],
    "validate_client_id_url": ["client_id"],
    "resolve_and_validate": ["host", "port"],
    "add_iss_to_redirect": ["uri", "issuer"],
}


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_each_private_helper_of_the_toolkit_we_use_still_takes_the_arguments_we_pass(name):
    helper = getattr(dot_compat, name)
    parameters = list(inspect.signature(helper).parameters)
    assert len(parameters) >= len(HELPERS[name]), f"{name}{inspect.signature(helper)}"


@pytest.mark.parametrize(("path", "method"), dot_compat.OVERRIDDEN)
def test_each_private_method_we_override_still_exists_on_the_toolkit_class(path, method):
    module, _, name = path.rpartition(".")
    cls = getattr(import_module(module), name)
    assert callable(getattr(cls, method, None)), f"{path}.{method} is gone: our override would never run"


def test_pkce_accepts_only_s256_after_allow_only_s256():
    class Grant:
        _code_challenge_methods = {"plain": object(), "S256": object()}

    grant = Grant()
    dot_compat.allow_only_s256(grant)
    assert set(grant._code_challenge_methods) == {"S256"}
