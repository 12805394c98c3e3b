"""``POST completion``: an inline completion for JupyterLab's inline completer (NB-2).

The lab extension (labextension/src/completion.ts) sends the text around the cursor and
its context (server/completion_context.py); this handler asks the person's model through
Crystal's own provider layer, with the person's Home config (``completionModel``, else
the session's model) and key, so no key ever reaches the browser. The request is
authenticated and XSRF-checked like every Jupyter API request.

The reply streams as JSON lines (``application/x-ndjson``), one per piece of the answer:
``{"text": PIECE}`` ... then ``{"done": true}``. ``{"off": REASON}`` (one line, status
200) when completions are off (``inlineCompletion: "off"``) or cannot be made (the
``replay`` provider answers only from recordings). A bad setting, a missing key or a
model server that refuses the request before the answer starts is a 400 with one English
line; a failure after it started ends the stream with ``{"error": LINE}``.

When the page goes away (the person typed the next key and the extension aborted the
fetch), the connection closes and the model request is cancelled with it: the provider's
stream is closed, so the model server stops generating too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncGenerator
from typing import Any

from tornado import web
from tornado.iostream import StreamClosedError

from crystal_kernel.core.config import PROVIDERS, Config, load_config
from crystal_kernel.core.errors import ProviderError, UserError
from crystal_kernel.core.messages import Message
from crystal_kernel.jupyter.server.base import CrystalHandler
from crystal_kernel.jupyter.server.completion_context import (
    MAX_OUTPUT_TOKENS,
    SYSTEM,
    AnswerCleaner,
    CompletionInput,
    parse_body,
    user_message,
)
from crystal_kernel.providers.base import ModelRequest, TextChunk
from crystal_kernel.providers.common import RetryPolicy
from crystal_kernel.providers.registry import known_providers, make_provider

# A completion is worth a quick answer or none: no retries, and a short wait for the
# first piece (the person has typed on by then).
FIRST_PIECE_TIMEOUT = 20.0
_PROVIDERS: dict[tuple[Any, ...], Any] = {}
_MAX_CACHED = 8


def completion_config(config: Config) -> Config:
    """``config`` with ``completionModel`` (``[PROVIDER:]MODEL``) applied: a bare model
    name keeps the session's provider settings, as ``topicModel`` does."""
    spec = config.completion_model
    if not spec:
        return config
    name, sep, model = spec.partition(":")
    if not sep or name not in (*PROVIDERS, *known_providers()):
        name, model = config.provider, spec
    return dataclasses.replace(config, provider=name, model=model)


def completion_provider(config: Config) -> Any:
    """The provider for completions, kept between requests (a new HTTP client per
    keystroke would cost more than Crystal's whole budget); the key is part of the cache
    key, so a changed key or setting makes a new one."""
    key = (config.provider, config.effective_model, config.base_url, config.api_key_env, config.api_key(),
           config.request_timeout_seconds)
    provider = _PROVIDERS.get(key)
    if provider is None:
        provider = make_provider(config, retry=RetryPolicy(retries=0))
        if len(_PROVIDERS) >= _MAX_CACHED:
            _PROVIDERS.pop(next(iter(_PROVIDERS)))
        _PROVIDERS[key] = provider
    return provider


def off_reason(config: Config) -> str | None:
    """Why completions are not made with ``config`` (already completionModel-applied)."""
    if config.inline_completion == "off":
        return "Inline completions are off (inlineCompletion is \"off\" in config.json)."
    if config.provider == "replay":
        return ("Inline completions need a model: the provider is replay, which answers only "
                "from recordings (set provider, or completionModel, in config.json).")
    return None


async def answer_pieces(provider: Any, request: CompletionInput) -> AsyncGenerator[str, None]:
    """The cleaned answer, piece by piece; the provider's stream is closed on the way out
    (also when the caller is cancelled), which ends the model server's request."""
    model_request = ModelRequest(model=provider.model, system=SYSTEM,
                                 messages=[Message.user_text(user_message(request))], tools=[],
                                 purpose="completion", max_output_tokens=MAX_OUTPUT_TOKENS)
    cleaner = AnswerCleaner()
    stream = provider.stream(model_request)
    try:
        async for item in stream:
            if isinstance(item, TextChunk):
                added = cleaner.feed(item.text)
                if added:
                    yield added
                if cleaner.done:
                    break
        rest = cleaner.finish()
        if rest:
            yield rest
    finally:
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            await closer()


class CompletionHandler(CrystalHandler):
    """Streams one inline completion; cancelled when the page closes the request."""

    _pump: asyncio.Task[None] | None = None

    @web.authenticated
    async def post(self) -> None:
        try:
            request = parse_body(self.json_body())
            config = completion_config(load_config(self.home))
            reason = off_reason(config)
            if reason:
                self.reply({"off": reason})
                return
            config = dataclasses.replace(
                config, request_timeout_seconds=min(float(config.request_timeout_seconds), FIRST_PIECE_TIMEOUT))
            provider = completion_provider(config)
        except UserError as exc:
            self.fail(400, str(exc))
            return
        self._pump = asyncio.ensure_future(self._stream(provider, request))
        await asyncio.wait({self._pump})
        if self._pump.cancelled():
            return  # the page went away: nothing to finish
        self._pump.result()

    async def _stream(self, provider: Any, request: CompletionInput) -> None:
        pieces = answer_pieces(provider, request)
        started = False
        try:
            async for piece in pieces:
                if not started:
                    started = True
                    self.set_header("Content-Type", "application/x-ndjson")
                    self.set_header("Cache-Control", "no-cache")
                self.write(json.dumps({"text": piece}, ensure_ascii=False) + "\n")
                await self.flush()
        except (ProviderError, UserError) as exc:
            line = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
            if not started:
                self.fail(400, f"The completion model failed: {line}")
                return
            self.write(json.dumps({"error": line}) + "\n")
        except StreamClosedError:
            return  # the page went away between two pieces
        finally:
            await pieces.aclose()
        if not started:
            self.set_header("Content-Type", "application/x-ndjson")
        self.write(json.dumps({"done": True}) + "\n")
        self.finish()

    def on_connection_close(self) -> None:
        """The page aborted the request (the next keystroke): stop the model request."""
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
        super().on_connection_close()
