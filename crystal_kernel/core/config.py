"""Home, config.json, and the precedence config < environment < command-line flags.

Keys are camelCase (SPEC §11). Unknown keys survive every save. API keys are never
stored: ``apiKeyEnv`` names the variable that holds one.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.fsutil import atomic_write_json, read_json_object
from crystal_kernel.core.paths import home_dir

PROVIDERS = ("openai", "openai-responses", "anthropic", "replay")
APPROVAL_MODES = ("plan", "default", "edit", "review", "audit", "full")
MODES = ("plan", "work")
REASONING_EFFORTS = ("none", "low", "medium", "high")
DEFAULT_MAX_OUTPUT_TOKENS = 16_384
# FL-5: keys older versions wrote; ignored and dropped at the next save.
DROPPED_KEYS = ("promptSet", "promptAttachments")

SANDBOX_MODES = ("workspace-write", "read-only", "off")

ENV_OVERRIDES = {
    "CRYSTAL_PROVIDER": "provider",
    "CRYSTAL_MODEL": "model",
    "CRYSTAL_BASE_URL": "baseUrl",
    "CRYSTAL_API_KEY_ENV": "apiKeyEnv",
    "CRYSTAL_APPROVAL": "approval",
}

DEFAULT_MODELS = {
    "openai": "gpt-4.1",
    "openai-responses": "gpt-4.1",
    "anthropic": "claude-sonnet-4-6",
    "replay": "replay",
}
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass
class Config:
    """Effective settings for a session. ``raw`` is config.json as read (unknown keys kept)."""

    home: Path
    provider: str = "replay"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    approval: str = "default"
    mode: str = "work"
    bash_timeout_seconds: float = 120
    background_bash_timeout_seconds: float | None = 10800
    skills: bool = True
    forbidden: list[dict[str, str]] = field(default_factory=list)
    record: bool = False
    tool_output_limit: int = 30000
    topic_naming: bool = True
    review_model: str | None = None
    image_model: str | None = None
    # A small side model for topic naming ("[PROVIDER:]MODEL"); default: the session's.
    topic_model: str | None = None
    # NB-2: inline completions in JupyterLab ("on" | "off"), and the model that makes them
    # ("[PROVIDER:]MODEL", like topicModel); default: the session's model.
    inline_completion: str = "on"
    completion_model: str | None = None
    compaction_threshold: float = 0.8
    context_window: int | None = None
    # Whether the session's model takes image input; None: guessed from its name
    # (providers/common.py), which takes an unknown model for text-only.
    model_images: bool | None = None
    prices: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 50
    # Longest wait for the model server: to connect, or between two streamed pieces.
    request_timeout_seconds: float = 600
    # How long a form (question, approval) waits for a person; 0 = nobody will answer
    # (questions dismissed, asks denied at once). Fronts without a person ignore it.
    person_timeout_seconds: float = 3600
    # None: the provider's own default (nothing is sent). SPEC §12.
    reasoning_effort: str | None = None
    # Sent as max_completion_tokens / max_tokens / max_output_tokens on every turn request.
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    # TRUST-4: children (bash, jobs, exec tools, MCP servers) get the model key variables.
    pass_keys_to_tools: bool = False
    # SANDBOX-1: what processes a tool starts may write (workspace-write | read-only | off)
    # and whether they may open TCP connections.
    sandbox: str = "workspace-write"
    sandbox_network: bool = False
    raw: dict[str, Any] = field(default_factory=dict)
    # One line per key of config.json Crystal does not know (a misspelling, or a newer
    # version's key): the fronts show them as notes. The keys stay in the file.
    notes: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.home / "config.json"

    @property
    def effective_model(self) -> str:
        return self.model or DEFAULT_MODELS.get(self.provider, "default")

    def api_key(self) -> str | None:
        """The key from the named variable; UserError when the variable is missing."""
        if self.provider == "replay":
            return None
        name = self.api_key_env or DEFAULT_KEY_ENV.get(self.provider)
        if not name:
            return None
        from crystal_kernel.core.secrets import key_value

        value = key_value(name)  # TRUST-4: the kernel may hold it outside os.environ
        if not value:
            raise UserError(
                f"The API key variable {name} is not set (provider {self.provider}); "
                "set it or name another with apiKeyEnv / --api-key-env."
            )
        return value

    def save_preferences(self, **changes: Any) -> None:
        """Write config.json atomically: unknown keys kept, FL-5 keys dropped."""
        data = dict(_read_config_file(self.path))
        for key in DROPPED_KEYS:
            data.pop(key, None)
        for attr, value in changes.items():
            data[_CAMEL[attr]] = value
            setattr(self, attr, value)
        atomic_write_json(self.path, data, inside=self.home)  # TRUST-3: race-free in Home
        self.raw = data


# attribute name -> camelCase key
_CAMEL = {
    "provider": "provider", "model": "model", "base_url": "baseUrl", "api_key_env": "apiKeyEnv",
    "approval": "approval", "mode": "mode", "bash_timeout_seconds": "bashTimeoutSeconds",
    "background_bash_timeout_seconds": "backgroundBashTimeoutSeconds", "skills": "skills",
    "forbidden": "forbidden", "record": "record", "tool_output_limit": "toolOutputLimit",
    "topic_naming": "topicNaming", "review_model": "reviewModel", "image_model": "imageModel",
    "topic_model": "topicModel", "inline_completion": "inlineCompletion", "completion_model": "completionModel",
    "compaction_threshold": "compactionThreshold", "context_window": "contextWindow",
    "model_images": "modelImages",
    "prices": "prices", "max_steps": "maxSteps", "request_timeout_seconds": "requestTimeoutSeconds",
    "person_timeout_seconds": "personTimeoutSeconds",
    "reasoning_effort": "reasoningEffort", "max_output_tokens": "maxOutputTokens",
    "pass_keys_to_tools": "passKeysToTools", "sandbox": "sandbox", "sandbox_network": "sandboxNetwork",
}
_ATTR = {v: k for k, v in _CAMEL.items()}


def _read_config_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    return read_json_object(path, "config file")


def load_config(home: Path | None = None, overrides: dict[str, Any] | None = None,
                environ: Mapping[str, str] | None = None) -> Config:
    """config.json, then CRYSTAL_* variables, then ``overrides`` (camelCase keys, from flags)."""
    home = Path(home) if home else home_dir()
    env: Mapping[str, str] = os.environ if environ is None else environ
    raw = _read_config_file(home / "config.json")
    merged: dict[str, Any] = {k: v for k, v in raw.items() if k not in DROPPED_KEYS}
    for var, key in ENV_OVERRIDES.items():
        if env.get(var):
            merged[key] = env[var]
    for key, value in (overrides or {}).items():
        if value is not None:
            merged[key] = value
    config = Config(home=home, raw=raw, notes=unknown_key_notes(raw, home / "config.json"))
    for key, value in merged.items():
        attr = _ATTR.get(key)
        if attr is not None:
            setattr(config, attr, _check(key, value))
    # TRUST-4: whatever variable holds this config's key is kept out of children and files.
    from crystal_kernel.core.secrets import register_key_variable

    register_key_variable(config.api_key_env)
    return config


def _check(key: str, value: Any) -> Any:
    """Validate one setting; UserError with one line when it is wrong."""
    def bad(expected: str) -> UserError:
        return UserError(f"Config key '{key}' must be {expected}, not {value!r}.")

    if key == "approval" and value not in APPROVAL_MODES:
        raise UserError(f"Unknown approval mode '{value}'; use one of: {', '.join(APPROVAL_MODES)}.")
    if key == "mode" and value not in MODES:
        raise UserError(f"Unknown mode '{value}'; use plan or work.")
    if key == "inlineCompletion" and value not in ("on", "off"):
        raise bad('"on" or "off"')
    if key == "sandbox" and value not in SANDBOX_MODES:
        raise UserError(f"Config key 'sandbox' must be one of {', '.join(SANDBOX_MODES)}, not {value!r}.")
    if key in ("skills", "record", "topicNaming", "passKeysToTools", "sandboxNetwork") and not isinstance(value, bool):
        raise bad("true or false")
    if key in ("bashTimeoutSeconds", "requestTimeoutSeconds"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise bad("a positive number")
    if key == "personTimeoutSeconds":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise bad("a number of seconds (0: nobody answers forms)")
    if key == "backgroundBashTimeoutSeconds":
        if value is None or value == "unlimited":
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise bad('a positive number, null or "unlimited"')
    if key == "modelImages" and value is not None and not isinstance(value, bool):
        raise bad("true, false or null (guessed from the model's name)")
    if key == "reasoningEffort":
        return check_reasoning_effort(value)
    if key in ("toolOutputLimit", "maxSteps", "contextWindow", "maxOutputTokens"):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise bad("a positive whole number")
    if key == "compactionThreshold":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise bad("a number between 0 and 1")
    if key == "forbidden":
        if not isinstance(value, list) or not all(
            isinstance(r, dict) and isinstance(r.get("tool"), str) and isinstance(r.get("pattern"), str)
            for r in value
        ):
            raise bad('a list of {"tool": NAME, "pattern": GLOB} objects')
    if key in ("provider", "model", "baseUrl", "apiKeyEnv", "reviewModel", "imageModel", "topicModel",
               "completionModel"):
        if not isinstance(value, str) or not value:
            raise bad("a non-empty string")
        return check_base_url(value) if key == "baseUrl" else value
    return value


def check_base_url(value: str) -> str:
    """A model server URL the HTTP client can use: http(s)://HOST[:PORT][/PATH]. A
    mistake here is a configuration error (one line, nothing sent), never a network
    failure to retry."""
    where = "The base URL (--base-url, baseUrl or CRYSTAL_BASE_URL)"
    text = value.strip()
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https"):
        if "://" in text:
            raise UserError(f"{where} '{value}' must start with http:// or https://, not {parts.scheme}://.")
        raise UserError(f"{where} '{value}' has no http:// or https://; write it as http://{text}.")
    try:
        port = parts.port  # ValueError for a port that is not a number 0-65535
    except ValueError:
        port = -1
    if not parts.hostname or port == -1 or any(c.isspace() for c in text):
        raise UserError(f"{where} '{value}' is not a valid URL; write it as e.g. http://localhost:11434/v1.")
    return text


def check_reasoning_effort(value: Any, where: str = "Config key 'reasoningEffort'") -> str | None:
    """none|low|medium|high; null (or "default") means the provider's default."""
    if value is None or value == "default":
        return None
    if value not in REASONING_EFFORTS:
        raise UserError(f"{where} must be one of {', '.join(REASONING_EFFORTS)} (or default), not {value!r}.")
    return str(value)


def known_keys() -> tuple[str, ...]:
    """The config.json keys the Config fields read."""
    return tuple(_CAMEL.values())


# config.json keys read elsewhere than the Config fields (replay.py, host/review.py).
OTHER_KEYS = ("cassette", "reviewTimeoutSeconds")


def closest_key(key: str, known: Sequence[str]) -> str | None:
    """The known key ``key`` is most likely a misspelling of (difflib, case-blind); a
    candidate with the same letters wins (``modle`` is ``model`` with two letters
    swapped, though ``mode`` is as close by edit count)."""
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(key.lower(), list(lowered), n=3, cutoff=0.6)
    same_letters = [c for c in close if sorted(c) == sorted(key.lower())]
    best = same_letters or close
    return lowered[best[0]] if best else None


def unknown_key_notes(raw: Mapping[str, Any], path: Path) -> list[str]:
    """One line per key of ``raw`` that Crystal does not read, naming the closest known
    key when one is close (difflib): a misspelt ``modle`` would otherwise be silently
    ignored. The old FL-5 keys are dropped without a word."""
    known = [*known_keys(), *OTHER_KEYS]
    notes = []
    for key in raw:
        if key in known or key in DROPPED_KEYS:
            continue
        guess = closest_key(key, known)
        if guess:
            notes.append(f"unknown key '{key}' in {path} — did you mean '{guess}'?")
        else:
            notes.append(f"unknown key '{key}' in {path} is ignored (kept in the file; see docs/configuration.md).")
    return notes
