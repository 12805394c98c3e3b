"""``GET/POST promptsets`` and ``GET/POST attachments``: the same functions, rules and
messages as ``crystal promptsets`` and ``crystal prompt-attachments`` (PS-9, PA-9).

POST bodies are ``{"action": "enable"|"disable"|..., "name": NAME}``; attachments also
take ``"source": "home"|"project"`` like the CLI's ``--source``. The reply is the new
listing plus the one-line ``message`` the CLI prints. Prompt sets are Home-only (PS-1);
attachments come from Home and the workspace (PA-4).
"""

from __future__ import annotations

from tornado import web

from crystal_kernel.jupyter.server.base import CrystalHandler
from crystal_kernel.jupyter.server.prompt_actions import (
    attachments_action,
    attachments_listing,
    promptsets_action,
    promptsets_listing,
)


class PromptSetsHandler(CrystalHandler):
    @web.authenticated
    async def get(self) -> None:
        await self.guarded(lambda: promptsets_listing(self.home))

    @web.authenticated
    async def post(self) -> None:
        await self.guarded(lambda: promptsets_action(self.home, self.json_body()))


class AttachmentsHandler(CrystalHandler):
    @web.authenticated
    async def get(self) -> None:
        await self.guarded(lambda: attachments_listing(self.home, self.workspace()))

    @web.authenticated
    async def post(self) -> None:
        await self.guarded(lambda: attachments_action(self.home, self.workspace(), self.json_body()))
