"""A real in-process jupyter_server (pytest-jupyter) with the Crystal extension."""

from __future__ import annotations

import json

import pytest

# pytest-jupyter's fixtures (and its autouse event loop) for this folder only: a
# non-top-level conftest may not set pytest_plugins, and loading the plugin for the whole
# suite would hand every async test to its loop instead of pytest-asyncio's.
from pytest_jupyter.jupyter_core import *  # noqa: F401,F403,E402
from pytest_jupyter.jupyter_server import *  # noqa: F401,F403,E402


@pytest.fixture
def jp_server_config():
    return {"ServerApp": {"jpserver_extensions": {"crystal_kernel.jupyter.server_ext": True}}}


@pytest.fixture
def api(jp_fetch, jp_asyncio_loop):
    """``api("GET", "sessions", params=..., body=...)`` -> (status, json).

    Synchronous on purpose: the server runs on pytest-jupyter's loop, and the tests
    drive that loop directly instead of letting pytest-asyncio start another one.
    """
    from tornado.httpclient import HTTPClientError

    async def fetch(method, *parts, params=None, body=None, headers=None):
        kwargs = {"method": method}
        if body is not None:
            kwargs["body"] = body if isinstance(body, (str, bytes)) else json.dumps(body)
        elif method == "POST":
            kwargs["body"] = "{}"
        try:
            response = await jp_fetch("crystal", "api", *parts, params=params, headers=headers, **kwargs)
        except HTTPClientError as exc:
            return exc.code, _decode(exc.response.body if exc.response else b"")
        return response.code, _decode(response.body)

    def call(method, *parts, **kwargs):
        return jp_asyncio_loop.run_until_complete(fetch(method, *parts, **kwargs))

    return call


def _decode(body: bytes):
    """JSON when it is JSON (every Crystal reply); else the raw text (tornado's own 404 page)."""
    try:
        return json.loads(body or b"null")
    except ValueError:
        return body.decode("utf-8", "replace")
