"""``GET info``: what the lab extension needs to know about this server.

``gateway`` is true when the server runs its kernels elsewhere (``--gateway-url``:
Jupyter Kernel Gateway, Enterprise Gateway). Such a kernel's Home and workspace are
not on this server's disk, so the sidebar then asks the notebook's kernel over the
``crystal.sidebar`` comm (jupyter/sidebar_comm.py) instead of this API.
"""

from __future__ import annotations

from typing import Any

from tornado import web

from crystal_kernel.jupyter.server.base import CrystalHandler


def gateway_enabled(settings: dict[str, Any]) -> bool:
    """True when the server's kernels go through a gateway."""
    app = settings.get("serverapp")
    config = getattr(app, "gateway_config", None)
    if config is None:
        try:
            from jupyter_server.gateway.gateway_client import GatewayClient

            config = GatewayClient.instance()
        except Exception:
            return False
    return bool(getattr(config, "gateway_enabled", False))


class InfoHandler(CrystalHandler):
    @web.authenticated
    async def get(self) -> None:
        await self.guarded(lambda: {"gateway": gateway_enabled(self.settings)})
