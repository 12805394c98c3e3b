"""The kernel's and the magics' side of live notebook edits: find the Jupyter server
that started this kernel and ask its Crystal extension to apply a notebook_edit to the
notebook's shared document (server/live_notebook.py).

The server is found through its runtime file (``jpserver-<pid>.json``: url and token):
the one whose process started this kernel, else one whose root folder holds the
notebook. A ``crystal space`` keeps its runtime files in its host-only folder in Home
(SANDBOX-2, core/paths.py ``space_runtime_dir``), looked in first; then the person's
Jupyter runtime folder. Only loopback servers are used. Any failure (no server, an old server without
the route, a timeout) returns None and the tool writes the file instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

TIMEOUT_SECONDS = 10.0
ROUTE = "crystal/api/notebook-edit"


def find_server(notebook: Path) -> dict[str, Any] | None:
    """The running Jupyter server this kernel belongs to, from its runtime file."""
    from crystal_kernel.core.paths import home_dir, space_runtime_dir

    parent = os.getppid()
    running: list[dict[str, Any]] = []
    for runtime in (str(space_runtime_dir(home_dir(), parent)), None):
        try:
            from jupyter_server.serverapp import list_running_servers

            running += list(list_running_servers(runtime))
        except Exception:
            continue
    servers: list[dict[str, Any]] = [s for s in running if urlparse(str(s.get("url", ""))).hostname in ("127.0.0.1", "localhost", "::1")]
    for server in servers:
        if server.get("pid") == parent:
            return server
    for server in servers:
        root = Path(os.path.realpath(str(server.get("root_dir", ""))))
        if root in Path(os.path.realpath(notebook)).parents:
            return server
    return None


def _post(url: str, token: str, body: dict[str, Any]) -> dict[str, Any] | None:
    request = urllib.request.Request(url, method="POST", data=json.dumps(body).encode("utf-8"),
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            answer: dict[str, Any] = json.loads(response.read())  # the server extension's own reply
            return answer
    except urllib.error.HTTPError as exc:
        if exc.code == 400:  # the edit itself is wrong: the tool reports the message
            try:
                return {"error": json.loads(exc.read()).get("error", "The edit was refused.")}
            except (ValueError, OSError):
                return {"error": "The edit was refused."}
        return None
    except (OSError, ValueError):
        return None


async def live_edit(path: Path, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """Apply a notebook_edit to the open notebook's shared document. Returns the
    server's answer (``live`` true or false, or ``error``), or None without a server."""
    server = await asyncio.to_thread(find_server, path)
    if server is None:
        return None
    url = str(server["url"]).rstrip("/") + "/" + ROUTE
    body = {k: v for k, v in arguments.items() if v is not None}
    body["path"] = str(path)
    return await asyncio.to_thread(_post, url, str(server.get("token", "")), body)
