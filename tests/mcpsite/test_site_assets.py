"""The site's icon and the JSON editor's worker: served, and linked from every kind of page."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_favicon_ico_leads_to_the_sites_icon() -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == "/static/favicon.svg"


def test_every_kind_of_page_links_the_icon(admin_client: Client) -> None:
    for path in ("/", "/admin/", "/admin/mcp_app/tool/add/", "/no/such/page"):
        page = admin_client.get(path)
        assert '<link rel="icon" href="/static/favicon.svg"' in page.content.decode(), path


def test_the_json_editors_syntax_worker_is_served_from_our_origin(admin_client: Client) -> None:
    page = admin_client.get("/admin/mcp_app/tool/add/").content.decode()
    assert 'data-worker-url="/json-editor/json-worker.js"' in page
    worker = Client().get("/json-editor/json-worker.js")
    assert worker.status_code == 200
    assert worker["Content-Type"].startswith("application/javascript")
    assert b"JsonWorker" in worker.content
