"""Reuse the transport tests' client helpers and their per-test cleanup."""

from tests.transport.conftest import clean_transport_state, tools_a  # noqa: F401
