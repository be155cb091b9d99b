"""tenants.access: permission-checked fetches answer a non-member like a missing tenant."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import Http404

from tenants.access import access_tenant, role_of, tenant_ids_for
from tenants.models import Role

pytestmark = pytest.mark.django_db


def test_role_of_gives_each_personas_role(alice, bob, charlie, tenant_a, admin_user):
    assert role_of(alice, tenant_a) == Role.OWNER
    assert role_of(bob, tenant_a) == Role.VIEWER
    assert role_of(charlie, tenant_a) is None
    assert role_of(admin_user, tenant_a) == Role.OWNER
    assert role_of(AnonymousUser(), tenant_a) is None


def test_access_tenant_returns_the_tenant_to_members_and_editors(alice, bob, tenant_a):
    assert access_tenant(alice, "tenant-a", edit=True) == tenant_a
    assert access_tenant(bob, "tenant-a") == tenant_a


def test_access_tenant_answers_non_members_and_viewers_editing_like_a_missing_tenant(bob, charlie, tenant_a):
    for user, slug, edit in (
        (charlie, "tenant-a", False),
        (bob, "tenant-a", True),
        (charlie, "missing", False),
    ):
        with pytest.raises(Http404) as info:
            access_tenant(user, slug, edit=edit)
        assert str(info.value) == "No such tenant."


def test_tenant_ids_for_lists_memberships_and_none_means_all_for_superusers(
    alice, bob, charlie, tenant_a, admin_user
):
    assert tenant_ids_for(alice, edit=True) == {tenant_a.id}
    assert tenant_ids_for(bob) == {tenant_a.id}
    assert tenant_ids_for(bob, edit=True) == set()
    assert tenant_a.id not in tenant_ids_for(charlie)
    assert tenant_ids_for(admin_user) is None
