"""Every Crystal route refuses a request without a valid token (403, JSON)."""

from __future__ import annotations

import pytest

ROUTES = [
    ("GET", ("info",)), ("GET", ("sessions",)), ("GET", ("sessions", "abc")), ("GET", ("status",)),
    ("GET", ("jobs",)), ("GET", ("jobs", "s1", "j1", "log")), ("POST", ("jobs", "s1", "j1", "stop")),
    ("GET", ("promptsets",)), ("POST", ("promptsets",)),
    ("GET", ("attachments",)), ("POST", ("attachments",)),
]


@pytest.mark.parametrize("method,parts", ROUTES)
@pytest.mark.parametrize("authorization", ["", "token wrong-token"])
def test_unauthenticated_requests_are_403(api, method, parts, authorization):
    status, data = api(method, *parts, headers={"Authorization": authorization})
    assert status == 403
    assert "error" in data


def test_authenticated_request_passes(api):
    assert api("GET", "jobs")[0] == 200
