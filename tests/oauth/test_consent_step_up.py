"""Step-up consent: the scope a client comes back for is marked "New" beside those it already has (AMB-235)."""

from __future__ import annotations

import pytest

from mcp_app.models import Tool
from mcp_app.oauth import scopes
from tenants.models import Membership, Role, Tenant
from tests.oauth.as_support import (
    authorize_params,
    authorize_url,
    canonical,
    consent,
    exchange,
    pkce_pair,
    redirect_params,
    registered_public_client,
)

pytestmark = pytest.mark.django_db

BASE = " ".join(scopes.BASE_SCOPES)


@pytest.fixture
def dave(django_user_model):
    tenant = Tenant.objects.create(slug="vault", name="vault", title="The Vault", auth_mode="oauth")
    Tool.objects.create(tenant=tenant, name="open_safe", handler="template", required_scope="vault:open")
    user = django_user_model.objects.create_user("dave", "dave@example.com", "dave-pw-123")
    Membership.objects.create(user=user, tenant=tenant, role=Role.VIEWER)
    return user


def new_lines(page) -> dict[str, bool]:
    return {line["name"]: line["new"] for line in page.context["scope_lines"]}


def test_the_first_consent_marks_nothing_and_a_step_up_marks_only_the_new_scope(client, dave) -> None:
    app = registered_public_client(client)
    client.force_login(dave)
    verifier, challenge = pkce_pair()
    first = authorize_params(app["client_id"], challenge, resource=canonical("vault"), scope=BASE)
    page = client.get(authorize_url(first))
    assert not any(new_lines(page).values())
    assert "step-up" not in page.content.decode()
    code = redirect_params(consent(client, first))["code"]
    assert exchange(client, app["client_id"], code, verifier).status_code == 200

    # The client meets a 403 insufficient_scope on open_safe and asks again, for everything it needs.
    _verifier, challenge = pkce_pair()
    again = authorize_params(app["client_id"], challenge, resource=canonical("vault"), scope=f"{BASE} vault:open")
    page = client.get(authorize_url(again))
    marks = new_lines(page)
    assert marks.pop("vault:open") is True
    assert marks and not any(marks.values())
    html = page.content.decode()
    assert html.count('class="badge">New<') == 1 and 'id="step-up"' in html


def test_another_client_or_server_is_not_taken_for_a_grant(client, dave) -> None:
    app = registered_public_client(client)
    other = registered_public_client(client)
    client.force_login(dave)
    verifier, challenge = pkce_pair()
    first = authorize_params(app["client_id"], challenge, resource=canonical("vault"), scope=BASE)
    code = redirect_params(consent(client, first))["code"]
    assert exchange(client, app["client_id"], code, verifier).status_code == 200
    _verifier, challenge = pkce_pair()
    page = client.get(
        authorize_url(authorize_params(other["client_id"], challenge, resource=canonical("vault"), scope=BASE))
    )
    assert not any(new_lines(page).values())  # a first consent for this client: nothing singled out
