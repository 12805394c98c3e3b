"""Provider construction from config: the built-in names plus plugins' providers.

``make_provider(config)`` returns a ready :class:`~crystal_kernel.providers.base.Provider`.
With ``record`` on, a live provider is wrapped so each finished reply is appended to the
cassette (replay.py). Unknown names are a :class:`UserError` listing the known ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crystal_kernel.core.config import DEFAULT_KEY_ENV, Config
from crystal_kernel.core.errors import UserError
from crystal_kernel.providers.base import Capabilities, Provider
from crystal_kernel.providers.common import RetryPolicy, capabilities_for

BUILTIN = ("openai", "openai-responses", "anthropic", "replay")


def plugin_providers() -> dict[str, Callable[[Config], Provider]]:
    """Provider factories contributed by plugins (first plugin keeps a name)."""
    from crystal_kernel.plugins import call_each

    found: dict[str, Callable[[Config], Provider]] = {}
    # call_each: load order, and a plugin that raises is skipped instead of failing startup.
    for _plugin, answer in call_each("crystal_providers", []):
        if not isinstance(answer, dict):
            continue
        for name, factory in answer.items():
            if name not in BUILTIN:
                found.setdefault(name, factory)
    return found


def known_providers() -> list[str]:
    return [*BUILTIN, *sorted(plugin_providers())]


def _api_key(config: Config) -> str | None:
    try:
        return config.api_key()
    except UserError:
        # A local server (Ollama, llama.cpp, ...) behind baseUrl usually needs no key; if
        # it does, its 401 says which variable to set.
        if config.base_url and not config.api_key_env:
            return None
        raise


def make_provider(config: Config, *, workspace: Path | None = None, model: str | None = None,
                  retry: RetryPolicy | None = None) -> Provider:
    """The provider ``config.provider`` names, for ``model`` (default: the config's model)."""
    name = config.provider
    model = model or config.effective_model
    workspace = Path(workspace) if workspace else Path.cwd()
    if name == "replay":
        from crystal_kernel.providers.replay import ReplayProvider, cassette_path

        # A recording may hold any model's replies; images are kept, the window is generous.
        return ReplayProvider(cassette_path(config, workspace), model=model,
                              capabilities=Capabilities(images=True, context_window=config.context_window or 200_000))
    provider: Provider
    if name in ("openai", "openai-responses", "anthropic"):
        kwargs: dict[str, Any] = {
            "api_key": _api_key(config),
            "base_url": config.base_url,
            # modelImages is said of the session's model; a side model (imageModel, ...)
            # keeps the guess from its own name.
            "capabilities": capabilities_for(model, config.context_window,
                                             config.model_images if model == config.effective_model else None),
            "key_env": config.api_key_env or DEFAULT_KEY_ENV.get(name),
            "timeout": float(config.request_timeout_seconds),
        }
        if retry is not None:
            kwargs["retry"] = retry
        if name == "openai":
            from crystal_kernel.providers.openai_chat import OpenAIChatProvider

            provider = OpenAIChatProvider(model, **kwargs)
        elif name == "openai-responses":
            from crystal_kernel.providers.openai_responses import OpenAIResponsesProvider

            provider = OpenAIResponsesProvider(model, **kwargs)
        else:
            from crystal_kernel.providers.anthropic import AnthropicProvider

            provider = AnthropicProvider(model, **kwargs)
        if config.base_url and config.context_window is None:
            # A local or self-hosted server: its window is whatever it was started with.
            provider.probe_context = True
    else:
        factories = plugin_providers()
        if name not in factories:
            raise UserError(f"Unknown provider '{name}'; use one of: {', '.join(known_providers())}.")
        provider = factories[name](config)
    if config.record:
        from crystal_kernel.providers.replay import RecordingProvider, cassette_path

        path = Path(os.path.abspath(cassette_path(config, workspace)))
        root = Path(os.path.abspath(workspace))
        provider = RecordingProvider(provider, path, inside=root if root in path.parents else None)
    return provider
