"""The SSRF guard of the http handler: what it refuses, what the allow-list admits."""

from __future__ import annotations

import pytest

from mcp_app.core.ssrf import SsrfRefused, check_url_statically, vet_url


@pytest.fixture
def no_allow_list(settings):
    settings.MCP_HTTP_HANDLER_ALLOW = []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://127.0.0.1/", "a loopback address"),
        ("https://10.0.0.1/", "a private address"),
        ("https://192.168.1.10/", "a private address"),
        ("https://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
        ("https://169.254.10.1/", "a link-local address"),
        ("https://100.64.0.1/", "a reserved address"),
        ("https://0.0.0.0/", "an unspecified address"),
        ("https://224.0.0.1/", "a multicast address"),
        ("https://[::1]/", "a loopback address"),
        ("https://[::ffff:127.0.0.1]/", "an IPv6 form of a loopback address"),
        ("https://[::ffff:10.0.0.1]/", "an IPv6 form of a private address"),
        ("https://[64:ff9b::a9fe:a9fe]/", "an IPv6 form of a cloud metadata address"),
        ("https://[fd00:ec2::254]/", "a cloud metadata address"),
        ("https://[fe80::1]/", "a link-local address"),
    ],
)
async def test_vet_url_refuses_non_public_addresses(no_allow_list, url, reason):
    with pytest.raises(SsrfRefused, match=reason):
        await vet_url(url)


async def test_hostname_resolving_to_loopback_is_refused(no_allow_list):
    with pytest.raises(SsrfRefused, match="'localhost' resolves to a loopback address"):
        await vet_url("https://localhost:8443/x")


async def test_cloud_metadata_hostname_is_refused_without_resolving(no_allow_list):
    with pytest.raises(SsrfRefused, match="cloud metadata service"):
        await vet_url("http://metadata.google.internal/computeMetadata/v1/")


async def test_allow_listed_hostname_is_admitted_and_pinned_to_its_address(settings):
    settings.MCP_HTTP_HANDLER_ALLOW = ["localhost"]
    target = await vet_url("http://localhost:8765/echo")
    assert target.host == "localhost" and target.port == 8765 and target.allow_listed
    assert target.ip in ("127.0.0.1", "::1")


@pytest.mark.parametrize("entry", ["127.0.0.1", "127.0.0.0/8"])
async def test_allow_listed_ip_or_cidr_admits_loopback_over_plain_http(settings, entry):
    settings.MCP_HTTP_HANDLER_ALLOW = [entry]
    target = await vet_url("http://127.0.0.1:8765/echo")
    assert target.ip == "127.0.0.1" and target.scheme == "http"


async def test_allow_list_entry_does_not_admit_other_private_addresses(settings):
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    with pytest.raises(SsrfRefused, match="a private address"):
        await vet_url("http://10.0.0.1/")


async def test_plain_http_to_a_public_address_is_refused(no_allow_list):
    with pytest.raises(SsrfRefused, match="must use https"):
        await vet_url("http://93.184.215.14/")


async def test_public_https_address_is_admitted_without_dns(no_allow_list):
    target = await vet_url("https://93.184.215.14:8443/x")
    assert (target.ip, target.port, target.allow_listed) == ("93.184.215.14", 8443, False)


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "gopher://127.0.0.1/", "https:///nohost", "http://[::1/"]
)
async def test_non_http_or_malformed_urls_are_refused(no_allow_list, url):
    with pytest.raises(SsrfRefused):
        await vet_url(url)


async def test_unresolvable_host_is_refused_with_a_clear_message(no_allow_list):
    with pytest.raises(SsrfRefused, match="could not be resolved"):
        await vet_url("https://does-not-exist.invalid/")


def test_static_check_refuses_literal_private_addresses_for_the_admin(no_allow_list):
    with pytest.raises(SsrfRefused, match="a private address"):
        check_url_statically("https://10.1.2.3/")
    check_url_statically("https://api.example.com/")
