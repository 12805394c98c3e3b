"""Fixtures for the provider adapters: a loopback model server and adapters aimed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from crystal_kernel.providers.anthropic import AnthropicProvider
from crystal_kernel.providers.common import RetryPolicy
from crystal_kernel.providers.openai_chat import OpenAIChatProvider
from crystal_kernel.providers.openai_responses import OpenAIResponsesProvider
from crystal_kernel.testing.llm_server import LLMServer

KINDS = ["chat", "responses", "anthropic"]
# Retries as a user gets them, only with a short first wait so the suite stays fast.
FAST = RetryPolicy(retries=2, backoff=0.01, max_wait=1.0)
MODELS = {"chat": "gpt-4.1", "responses": "gpt-4.1", "anthropic": "claude-sonnet-4-6"}


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer(max_hang=10) as srv:
        yield srv


def make_adapter(kind: str, url_server: LLMServer | str, **kwargs: Any) -> Any:
    """An adapter of ``kind`` aimed at the server (or a raw URL root like http://127.0.0.1:P)."""
    root = url_server.url if isinstance(url_server, LLMServer) else url_server
    kwargs.setdefault("retry", FAST)
    kwargs.setdefault("api_key", "test-key")
    model = kwargs.pop("model", MODELS[kind])
    if kind == "chat":
        return OpenAIChatProvider(model, base_url=root + "/v1", key_env="OPENAI_API_KEY", **kwargs)
    if kind == "responses":
        return OpenAIResponsesProvider(model, base_url=root + "/v1", key_env="OPENAI_API_KEY", **kwargs)
    return AnthropicProvider(model, base_url=root, key_env="ANTHROPIC_API_KEY", **kwargs)


@pytest.fixture
def adapter(server: LLMServer) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def build(kind: str, root: str | None = None, **kwargs: Any) -> Any:
        provider = make_adapter(kind, root or server, **kwargs)
        made.append(provider)
        return provider

    yield build
