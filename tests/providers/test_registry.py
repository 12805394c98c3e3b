"""make_provider: built-in names, plugins' providers, and the one-line errors for bad config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crystal_kernel import plugins
from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.messages import Message
from crystal_kernel.providers.anthropic import AnthropicProvider
from crystal_kernel.providers.base import ModelRequest, TextChunk
from crystal_kernel.providers.common import capabilities_for
from crystal_kernel.providers.openai_chat import OpenAIChatProvider
from crystal_kernel.providers.openai_responses import OpenAIResponsesProvider
from crystal_kernel.providers.registry import make_provider
from crystal_kernel.testing import ScriptedProvider, text_reply
from crystal_kernel.testing.llm_server import LLMServer


def config(tmp_path: Path, environ: dict[str, str] | None = None, **overrides: Any):
    return load_config(tmp_path / "home", overrides=overrides, environ=environ or {})


def test_builtin_names_make_their_adapters(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-test")
    assert isinstance(make_provider(config(tmp_path, provider="openai")), OpenAIChatProvider)
    responses = make_provider(config(tmp_path, provider="openai-responses", model="gpt-4o"))
    assert isinstance(responses, OpenAIResponsesProvider) and responses.model == "gpt-4o"
    claude = make_provider(config(tmp_path, provider="anthropic", contextWindow=50_000))
    assert isinstance(claude, AnthropicProvider)
    assert claude.capabilities.images is True and claude.capabilities.context_window == 50_000


def test_unknown_provider_lists_the_known_names(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        make_provider(config(tmp_path, provider="gemini"))
    assert str(info.value) == "Unknown provider 'gemini'; use one of: openai, openai-responses, anthropic, replay."


def test_missing_api_key_variable_is_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UserError, match="The API key variable ANTHROPIC_API_KEY is not set"):
        make_provider(config(tmp_path, provider="anthropic"))
    with pytest.raises(UserError, match="MY_KEY is not set"):
        make_provider(config(tmp_path, provider="openai", baseUrl="http://127.0.0.1:1/v1", apiKeyEnv="MY_KEY"))


async def test_local_server_needs_no_key(tmp_path: Path, monkeypatch) -> None:
    """Ollama, llama.cpp, LM Studio: baseUrl and no key variable set is fine."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with LLMServer([{"text": "local hello"}]) as server:
        provider = make_provider(config(tmp_path, provider="openai", baseUrl=server.base_url, model="llama3.1"))
        items = [i async for i in provider.stream(ModelRequest(model="llama3.1", system="",
                                                                messages=[Message.user_text("hi")]))]
        await provider.aclose()
    assert "".join(i.text for i in items if isinstance(i, TextChunk)) == "local hello"
    assert provider.capabilities.images is False, "unknown local models are treated as text-only"


def test_plugin_providers_are_found_by_name(tmp_path: Path) -> None:
    scripted = ScriptedProvider([text_reply("from a plugin")], name="myllm")

    class Plugin:
        @plugins.hookimpl
        def crystal_providers(self) -> dict[str, Any]:
            return {"myllm": lambda cfg: scripted, "openai": lambda cfg: scripted}

    plugins.reset_plugin_manager()
    try:
        plugins.plugin_manager().register(Plugin())
        assert make_provider(config(tmp_path, provider="myllm")) is scripted
        with pytest.raises(UserError, match="use one of: openai, openai-responses, anthropic, replay, myllm."):
            make_provider(config(tmp_path, provider="nope"))
    finally:
        plugins.reset_plugin_manager()


def test_capability_table() -> None:
    assert capabilities_for("gpt-4.1-mini").context_window == 1_047_576
    assert capabilities_for("claude-opus-4-6").images is True
    assert capabilities_for("gpt-3.5-turbo").images is False
    assert capabilities_for("llava:13b").images is True
    assert capabilities_for("qwen2.5-coder:7b").images is False
    assert capabilities_for("qwen2.5-coder:7b", context_window=65_536).context_window == 65_536
