"""SDK exception -> one English line (:class:`ProviderError`), by exception type.

The official SDKs raise ``APIStatusError`` subclasses for an HTTP error answer,
``APITimeoutError`` / ``APIConnectionError`` when no answer came, and leave the HTTP
client's own transport errors (``httpx`` or, for newer SDK releases, ``httpx2``) raw
when a stream breaks after it started. The socket error (``ConnectionRefusedError``,
``socket.gaierror``) is kept in the exception chain, so what went wrong is read from
types, never from class names or message text. Only the *server's* words (its error
body) are read, to quote them and to tell an unknown model from a missing endpoint.
"""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from crystal_kernel.core.errors import ProviderError

# The SDKs and HTTP clients whose exception types are mapped. Only those already imported
# are looked at: an exception of an SDK's type can exist only once that SDK is loaded, and
# importing both SDKs here cost `crystal run` about a second before its first request.
# The SDKs' exceptions are read from the module that defines them: `crystal run` defers
# the ``openai`` package's own __init__ (deferred_init.py), which the first error would
# otherwise run.
_SDKS = ("openai._exceptions", "anthropic._exceptions")
_HTTP_CLIENTS = ("httpx", "httpx2")


def _loaded(names: tuple[str, ...], attribute: str) -> tuple[type[BaseException], ...]:
    found = []
    for name in names:
        module = sys.modules.get(name)
        kind = getattr(module, attribute, None) if module is not None else None
        if isinstance(kind, type) and issubclass(kind, BaseException):
            found.append(kind)
    return tuple(found)


def status_errors() -> tuple[type[BaseException], ...]:
    """An HTTP error answer (it has ``status_code``, ``body`` and ``response``)."""
    return _loaded(_SDKS, "APIStatusError")


def timeout_errors() -> tuple[type[BaseException], ...]:
    """No answer in time: the SDKs' own, and the HTTP client's raw one mid-stream."""
    return _loaded(_SDKS, "APITimeoutError") + _loaded(_HTTP_CLIENTS, "TimeoutException")


def connection_errors() -> tuple[type[BaseException], ...]:
    """No answer at all, or the connection broke (``OSError`` covers the socket's own errors)."""
    return _loaded(_SDKS, "APIConnectionError") + _loaded(_HTTP_CLIENTS, "TransportError") + (OSError,)


# What a retry can fix: a busy, overloaded or briefly failing server. 501 (Not
# Implemented) and 505 are answers about what the server is, not about its load.
RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504, 529}
NOT_RETRIED_5XX = {501, 505}
# The answers of a server that is not this protocol's model server at all (a web page,
# Jupyter, ``python -m http.server``): no such path, or no POST there.
NOT_A_MODEL_SERVER = {404, 405, 501}


def retryable_status(status: int) -> bool:
    """Whether another attempt may get a different answer (429, 5xx but 501/505)."""
    return status in RETRY_STATUSES or (status >= 500 and status not in NOT_RETRIED_5XX)


@dataclass(frozen=True)
class Endpoint:
    """What an error message needs to name: the server, the model, the key variable, and
    the provider (a 404 on its path means the server does not speak its protocol)."""

    url: str
    model: str
    key_env: str | None = None
    provider: str | None = None


# For a 404 on a protocol's path: which provider the server probably speaks instead.
_INSTEAD = {"openai-responses": "openai (Chat Completions)", "anthropic": "openai (Chat Completions)"}
_PATHS = {"openai": "/chat/completions", "openai-responses": "/responses", "anthropic": "/v1/messages"}
# What the base URL of each protocol looks like, for the hint of a wrong one.
_KIND = {"openai": "an OpenAI Chat Completions", "openai-responses": "an OpenAI Responses",
         "anthropic": "an Anthropic Messages"}
_BASE_HINT = {"openai": "the server's /v1 address, e.g. http://localhost:11434/v1",
              "openai-responses": "the server's /v1 address, e.g. https://api.openai.com/v1",
              "anthropic": "the server's address without /v1, e.g. https://api.anthropic.com"}


def one_line(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _body_error(exc: BaseException) -> dict[str, Any]:
    """The ``error`` object of an SDK error's body (or the body itself), else empty."""
    body = getattr(exc, "body", None)
    if not isinstance(body, dict):
        return {}
    error = body.get("error", body)
    return error if isinstance(error, dict) else body


def _server_message(exc: BaseException) -> str:
    """The server's own error text from an SDK error, if any."""
    message = _body_error(exc).get("message")
    return one_line(message, 160) if isinstance(message, str) else ""


def _unknown_model(detail: str, where: Endpoint, exc: BaseException) -> bool:
    """A 404 about the model (not about the path): the servers say so in their answer."""
    text = detail.lower()
    return (_body_error(exc).get("code") == "model_not_found"
            or (bool(where.model) and where.model.lower() in text) or "model" in text)


def _in_chain(exc: BaseException, kinds: type[BaseException] | tuple[type[BaseException], ...]) -> bool:
    """Whether ``exc`` or any exception it was raised from or during is one of ``kinds``
    (the SDKs wrap the socket error in three layers)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, kinds):
            return True
        current = current.__cause__ or current.__context__
    return False


def _status(exc: BaseException) -> int | None:
    status: int | None = getattr(exc, "status_code", None) if isinstance(exc, status_errors()) else None
    return status


def _not_a_model_server(status: int, where: Endpoint, detail: str) -> ProviderError:
    """A 404/405/501 on the protocol's own path: the base URL points elsewhere."""
    path = _PATHS.get(where.provider or "", "")
    hint = _BASE_HINT.get(where.provider or "", "the model server's address")
    said = f" ({detail})" if detail else ""
    return ProviderError(f"The server at {where.url} is not {_KIND.get(where.provider or '', 'a')} model server: POST "
                         f"{where.url.rstrip('/')}{path} answered HTTP {status}{said}; is --base-url (baseUrl) "
                         f"{hint}?", status=status)


def _reason(exc: BaseException) -> str:
    """Why a connection failed, from the error under the SDK's, without end punctuation
    (the sentence around it supplies its own)."""
    cause = exc.__cause__ or exc.__context__
    reason = one_line(str(cause), 120) if cause and str(cause) else "connection failed"
    return reason.rstrip(" .") or "connection failed"


def map_error(exc: BaseException, where: Endpoint, *, attempts: int = 1) -> ProviderError:
    """One English line for an SDK exception raised before the answer started.

    ``retryable`` is set only for what another attempt can fix: a timeout, a dropped
    connection, 429 and 5xx other than 501/505. A configuration mistake (a URL the HTTP
    client cannot use, a server that is not a model server, a refused key) fails at once.
    """
    status = _status(exc)
    detail = _server_message(exc)
    suffix = f": {detail}" if detail else "."
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    if status is None:
        if isinstance(exc, timeout_errors()):
            return ProviderError(f"The model server at {where.url} did not answer in time{tries}.", retryable=True)
        if _in_chain(exc, _loaded(_HTTP_CLIENTS, "UnsupportedProtocol") + _loaded(_HTTP_CLIENTS, "InvalidURL")):
            return ProviderError(f"The model server URL '{where.url}' cannot be used ({_reason(exc)}); set "
                                 "--base-url (baseUrl) to an address that starts with http:// or https://.")
        if _in_chain(exc, ConnectionRefusedError):
            return ProviderError(f"Cannot reach the model server at {where.url}: connection refused.")
        if _in_chain(exc, socket.gaierror):
            return ProviderError(f"Cannot reach the model server at {where.url}: its host name does not resolve.")
        if isinstance(exc, connection_errors()):
            return ProviderError(f"Cannot reach the model server at {where.url}{tries}: {_reason(exc)}.",
                                 retryable=True)
        return ProviderError(f"The model request failed: {one_line(str(exc) or type(exc).__name__)}.")
    if status == 401:
        key = f" in {where.key_env}" if where.key_env else ""
        return ProviderError(f"The model server refused the API key (401); check the key{key} "
                             f"(or name another variable with apiKeyEnv){suffix}", status=status)
    if status == 403:
        return ProviderError(f"The model server denied access to model '{where.model}' (403){suffix}", status=status)
    if status == 404 and where.provider in _INSTEAD and not _unknown_model(detail, where, exc):
        # A chat-only server (llama.cpp, Ollama, vLLM builds without it) has no /responses.
        return ProviderError(f"The model server at {where.url} has no {_PATHS[where.provider]} endpoint (404): "
                             f"it does not speak the {where.provider} protocol; try provider "
                             f"{_INSTEAD[where.provider]}, or check --base-url (baseUrl){suffix}", status=status)
    if status in NOT_A_MODEL_SERVER and not (status == 404 and _unknown_model(detail, where, exc)):
        return _not_a_model_server(status, where, detail)
    if status == 404:
        return ProviderError(f"The model server at {where.url} does not know model '{where.model}' (404); "
                             f"check the model name and baseUrl{suffix}", status=status)
    if status == 429:
        return ProviderError(f"The model server at {where.url} is rate limiting requests (429){tries}{suffix}",
                             retryable=True, status=status)
    if status >= 500:
        return ProviderError(f"The model server at {where.url} failed (HTTP {status}){tries}{suffix}",
                             retryable=retryable_status(status), status=status)
    return ProviderError(f"The model server at {where.url} rejected the request (HTTP {status}){suffix}",
                         status=status, retryable=retryable_status(status))


def map_stream_error(exc: BaseException, where: Endpoint) -> ProviderError:
    """One line for a stream that broke after the answer started (kept text is interrupted)."""
    if isinstance(exc, ProviderError):
        return exc
    status = _status(exc)
    detail = _server_message(exc) or one_line(str(exc) or type(exc).__name__, 160)
    if status is not None:
        return ProviderError(f"The model server reported an error mid-answer (HTTP {status}): {detail}",
                             status=status)
    if isinstance(exc, timeout_errors()):
        return ProviderError(f"The model server at {where.url} stopped sending mid-answer (timed out).")
    if isinstance(exc, connection_errors()):
        detail = "the connection closed before the answer was complete."
    return ProviderError(f"The stream from the model server at {where.url} broke mid-answer: {detail}")


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date), if any."""
    if not isinstance(exc, status_errors()):
        return None
    response: Any = getattr(exc, "response", None)  # every status error has one
    headers = response.headers
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
