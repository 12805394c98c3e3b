"""The base class of the three SDK adapters: one streaming skeleton.

Every adapter does the same around its wire format: refuse text tools (MODE-6), build
the body, open the stream with bounded retries, read events with an idle bound, map a
broken stream to one line, close the HTTP stream whatever happens, and fail a stream
that ended before its final event. :meth:`SDKProvider.stream` does all of that once; an
adapter supplies :meth:`~SDKProvider.make_client`, :meth:`~SDKProvider.body`,
:meth:`~SDKProvider.open_stream` and a :class:`StreamReader` for its events.
"""

from __future__ import annotations

import ssl
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from typing import Any

from crystal_kernel.core.errors import ProviderError
from crystal_kernel.providers.base import Capabilities, ModelRequest, StreamItem, refuse_text_tools
from crystal_kernel.providers.common import RetryPolicy, capabilities_for, idle_bounded, with_retries
from crystal_kernel.providers.errors import Endpoint, map_stream_error


def no_trust_store(url: str) -> ssl.SSLContext | None:
    """For a plain-http ``url``: a TLS context that trusts no certificate; None otherwise.

    The SDKs' HTTP client reads the system's trust store when it is made (~50 ms of CPU,
    a tenth of ``crystal run``'s start), though a plain-http server never speaks TLS. Its
    client gets this context instead: nothing is read, and a redirect to an https address
    fails its certificate check (never an unchecked connection); such a server is
    configured with its https address.
    """
    if not url.lower().startswith("http://"):
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies certificates and host names
    return context


class StreamReader(ABC):
    """Turns one SDK stream's events into stream items, one reader per reply.

    :meth:`feed` is called for each event and yields what it completes; ``complete``
    is true after the protocol's final event; :meth:`end` yields what comes after the
    last event (tool calls, usage, ``Finished``). A reader may raise ``ProviderError``
    for an error the server reported inside the stream.
    """

    @property
    @abstractmethod
    def complete(self) -> bool:
        """Whether the protocol's final event arrived."""

    @abstractmethod
    def feed(self, event: Any) -> Iterable[StreamItem]:
        """The items ``event`` completes, in order."""

    @abstractmethod
    def end(self) -> Iterable[StreamItem]:
        """The items after a complete stream: tool calls, usage, ``Finished`` last."""


class SDKProvider:
    """What the three SDK adapters share: construction, the streaming skeleton,
    ``aclose`` and the error for a stream that ended early. Subclasses set ``name`` and
    ``default_url`` and implement :meth:`make_client`, :meth:`body`, :meth:`open_stream`
    and :meth:`reader`.
    """

    name: str
    default_url: str

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        capabilities: Capabilities | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 600.0,
        key_env: str | None = None,
    ) -> None:
        self.model = model
        self.capabilities = capabilities or capabilities_for(model)
        self.retry = retry or RetryPolicy()
        # The longest a person waits: for the answer to start (retries included), and
        # between two events of the answer (keep-alives do not count).
        self.timeout = timeout
        self.base_url = base_url
        url = base_url or self.default_url
        # Retries are ours (with_retries): bounded, and they honour retry-after.
        self.client = self.make_client(api_key=api_key or "none", base_url=url, timeout=timeout)
        self.endpoint = Endpoint(url=url, model=model, key_env=key_env, provider=self.name)

    #: Ask the server for its context window before the first request (set by the
    #: registry for a ``baseUrl`` server when config has no ``contextWindow``).
    probe_context: bool = False

    async def discover_context(self) -> str | None:
        """Ask the server once for its context window (server_info.py); adopt it and
        return a line saying so, or None when it was not asked or did not say."""
        if not self.probe_context:
            return None
        self.probe_context = False
        from crystal_kernel.providers.server_info import context_window

        key = getattr(self.client, "api_key", None)
        # SPEC §13: a probe is a request to the model server, so it ends by requestTimeoutSeconds.
        found = await context_window(self.endpoint.url, self.model, None if key in (None, "none") else key,
                                     deadline=self.timeout)
        if found is None:
            return None
        tokens, how = found
        self.capabilities = replace(self.capabilities, context_window=tokens)
        return f"Context window of {self.model}: {tokens:,} tokens ({how}, asked of {self.endpoint.url})."

    def make_client(self, *, api_key: str, base_url: str, timeout: float) -> Any:
        """The SDK's async client, created with ``max_retries=0``."""
        raise NotImplementedError

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body (without ``stream``)."""
        raise NotImplementedError

    def payload(self, body: dict[str, Any]) -> Any:
        """What :meth:`open_stream` sends for ``body``, made once per request (retries
        reuse it): the body itself, unless an adapter encodes it here."""
        return body

    async def open_stream(self, body: Any) -> Any:
        """Send ``body`` (what :meth:`payload` made) as a streamed request; the SDK's
        async event stream."""
        raise NotImplementedError

    def reader(self, request: ModelRequest) -> StreamReader:
        """A fresh reader for the reply to ``request``."""
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one reply. Cancelling the consumer closes the HTTP stream."""
        refuse_text_tools(request)
        payload = self.payload(self.body(request))
        events = await with_retries(lambda: self.open_stream(payload), self.endpoint, self.retry, self.timeout)
        reader = self.reader(request)
        try:
            async for event in idle_bounded(events, self.timeout, self.endpoint):
                for item in reader.feed(event):
                    yield item
        except Exception as exc:
            raise map_stream_error(exc, self.endpoint) from None
        finally:
            await events.close()
        if not reader.complete:
            raise self.ended_early()
        for item in reader.end():
            yield item

    def ended_early(self) -> ProviderError:
        """The error for a stream that closed cleanly before its final event."""
        return ProviderError(f"The stream from the model server at {self.endpoint.url} ended before the "
                             "answer was complete.")

    async def aclose(self) -> None:
        await self.client.close()
