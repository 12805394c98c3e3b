"""Secrets the host holds (TRUST-4): the model keys stay out of every child process and
out of every file the host writes.

- :func:`child_environment` is the one place a child's environment is built (bash,
  background jobs, notebook_run, exec tools, MCP servers): the host's environment
  without the key variables (:func:`key_variables`) unless config ``passKeysToTools``
  is true; exec tools and MCP servers also lose ``CRYSTAL_HOME`` (EX-2).
- :func:`redact` / :func:`redact_text` / :func:`mask_bytes` replace the *values* of those
  variables wherever they appear in what the host persists: session documents, job
  logs, cassettes.

- :func:`withdraw_keys` (the Crystal kernel, once its provider is built) moves the key
  variables out of ``os.environ`` into a private holder the host owns, so Python code
  the ``python`` notebook tool runs in the kernel's process, and processes it starts,
  find no key by name; :func:`key_value` is how the host reads a key from then on
  (a later ``/model`` still authenticates). :func:`keys_withdrawn` does the same for
  the duration of one tool call (the ``%crystal`` magics: the person's own kernel keeps
  its environment between calls).

The key variables are the provider variables Crystal knows (:data:`KEY_VARIABLES`),
every name a config in this process gave as ``apiKeyEnv`` (:func:`register_key_variable`,
called by the config loader) and ``CRYSTAL_API_KEY_ENV``'s value.

Host secrets are values the host holds that are not in any variable: the Home's signing
key (host/grants.py registers it with :func:`register_host_secret` whenever it reads or
makes it, and the front door reads it for every front, TRUST-7). They are redacted from
everything persisted like the key values, and also from every tool result before the
model or a front sees it (:func:`host_secret_values`, host/loop.py), whatever
``passKeysToTools`` says: no tool has a reason to show them.

Every key value of :data:`MIN_SECRET_LENGTH` (4) characters or more is redacted. A value
shorter than :data:`WHOLE_TOKEN_BELOW` (8) is redacted only where it stands as a whole
token (not inside a longer run of letters, digits, ``_`` or ``-``): a 5-character key
is still a key, but replacing ``abcd1`` inside every longer word would mangle the files.
Values of 1-3 characters are not secrets: they are the placeholders people give a local
server that checks no key (``OPENAI_API_KEY=x`` for Ollama), guessable in a few thousand
tries, and masking every standalone ``x`` or ``1`` would corrupt transcripts that are
sent back to the model on resume.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

# Provider key variables: the ones Crystal's providers read, and the usual ones of other
# model services a person may have set (a gateway behind baseUrl, a plugin provider).
KEY_VARIABLES: tuple[str, ...] = (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_API_KEY",
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY", "TOGETHER_API_KEY", "XAI_API_KEY", "FIREWORKS_API_KEY",
    "COHERE_API_KEY", "PERPLEXITY_API_KEY", "CEREBRAS_API_KEY", "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN", "OLLAMA_API_KEY", "LITELLM_API_KEY",
)
MIN_SECRET_LENGTH = 4
WHOLE_TOKEN_BELOW = 8
# What may not touch a short value for it to count as a whole token.
_TOKEN_CHARS = "A-Za-z0-9_\\-"
# Removed from exec tools and MCP servers (EX-2) whatever passKeysToTools says.
ALWAYS_DROPPED = ("CRYSTAL_HOME",)

_registered: set[str] = set()
_lock = threading.Lock()
# Host secrets (register_host_secret): (name, value), never in any environment; the
# newest HOST_SECRETS_KEPT, oldest first. A process has one Home (two values of its key);
# the bound keeps a process that opens many (a test worker) from redacting ever slower.
_host_secrets: dict[tuple[str, str], None] = {}
HOST_SECRETS_KEPT = 16
# Key values taken out of os.environ (withdraw_keys). Only the host reads them, by name,
# through key_value(); they never go back into an environment a tool's code can see.
_held: dict[str, str] = {}


def register_key_variable(name: str | None) -> None:
    """Remember that this process reads a key from ``name`` (config ``apiKeyEnv``)."""
    if name and isinstance(name, str):
        with _lock:
            _registered.add(name)


def register_host_secret(name: str, value: str) -> None:
    """Remember a secret value the host holds outside any variable (the Home's signing
    key): it is redacted as ``[redacted NAME]`` from what is persisted and from tool
    results. Values shorter than :data:`MIN_SECRET_LENGTH` are ignored."""
    if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _host_secrets.pop((name, value), None)
            _host_secrets[(name, value)] = None
            while len(_host_secrets) > HOST_SECRETS_KEPT:
                del _host_secrets[next(iter(_host_secrets))]


def host_secret_values() -> list[tuple[str, str]]:
    """(name, value) of every host secret, longest value first."""
    with _lock:
        found = list(_host_secrets)
    return sorted(found, key=lambda item: -len(item[1]))


def key_variables(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Every variable name whose value is a model key for this process."""
    environ = os.environ if environ is None else environ
    names = set(KEY_VARIABLES)
    with _lock:
        names |= _registered
    named = environ.get("CRYSTAL_API_KEY_ENV")
    if named:
        names.add(named)
    return frozenset(names)


def key_value(name: str) -> str | None:
    """The value of key variable ``name``: the host's holder first (the kernel withdrew
    it), then ``os.environ``; None when neither has one."""
    with _lock:
        held = _held.get(name)
    return held or os.environ.get(name) or None


def held_keys() -> dict[str, str]:
    """A copy of what the host holds (name -> value)."""
    with _lock:
        return dict(_held)


def withdraw_keys(config: Any = None) -> list[str]:
    """Move every key variable out of ``os.environ`` (and the C environment that
    subprocesses inherit) into the host's holder; their values in the process's initial
    environment block (``/proc/PID/environ``) are overwritten. Nothing happens with
    ``passKeysToTools``. Returns the names moved. TRUST-4."""
    if pass_keys(config):
        return []
    moved: list[str] = []
    names = sorted(key_variables())
    with _lock:
        for name in names:
            value = os.environ.pop(name, None)  # pop also unsets it in the C environment
            if value is not None:
                _held[name] = value
                moved.append(name)
    from crystal_kernel.core.environ_block import scrub_initial_environment

    scrub_initial_environment(moved)
    return moved


def restore_keys(names: Iterable[str]) -> None:
    """Put withdrawn variables back into ``os.environ`` with the values the host holds
    (whatever code set meanwhile is overwritten)."""
    with _lock:
        for name in names:
            value = _held.pop(name, None)
            if value is not None:
                os.environ[name] = value


@contextmanager
def keys_withdrawn(config: Any = None) -> Iterator[list[str]]:
    """The key variables are out of ``os.environ`` inside the block and back after it
    (the ``%crystal`` magics around one ``python`` tool call). Variables already held
    (the Crystal kernel withdrew them for good) stay held."""
    names = withdraw_keys(config)
    try:
        yield names
    finally:
        restore_keys(names)


def pass_keys(config: Any) -> bool:
    """Config ``passKeysToTools`` (default false); ``config`` may be None."""
    if config is None:
        return False
    value = getattr(config, "pass_keys_to_tools", None)
    if value is None:
        value = (getattr(config, "raw", None) or {}).get("passKeysToTools", False)
    return value is True


def child_environment(config: Any = None, *, extra: Mapping[str, str] | None = None,
                      defaults: Mapping[str, str] | None = None, keep_home: bool = False) -> dict[str, str]:
    """The environment of a child process: the host's, minus the key variables (unless
    ``passKeysToTools``) and ``CRYSTAL_HOME`` (kept with ``keep_home``: a shell the
    person's commands run in sees the same Home); ``defaults`` fill unset names and
    ``extra`` is set last."""
    env = dict(os.environ)
    drop = set() if keep_home else set(ALWAYS_DROPPED)
    if pass_keys(config):
        for name, value in held_keys().items():  # the person opted in: tools see the keys
            env.setdefault(name, value)
    else:
        drop |= key_variables(env)
    for name in drop:
        env.pop(name, None)
    for name, value in (defaults or {}).items():
        env.setdefault(name, value)
    env.update(extra or {})
    return env


def child_environment_bytes(config: Any = None, *, extra: Mapping[str, str] | None = None) -> dict[bytes, bytes]:
    """:func:`child_environment` as bytes (POSIX): variables that are not valid UTF-8
    pass through unchanged."""
    drop = {os.fsencode(n) for n in ALWAYS_DROPPED}
    if not pass_keys(config):
        drop |= {os.fsencode(n) for n in key_variables()}
    env = {k: v for k, v in os.environb.items() if k not in drop}
    if pass_keys(config):
        for name, value in held_keys().items():
            env.setdefault(os.fsencode(name), os.fsencode(value))
    env.update((os.fsencode(k), os.fsencode(v)) for k, v in (extra or {}).items())
    return env


def secret_values(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(name, value) of every key variable that is set (or that the host holds, when
    ``environ`` is the process's) and every host secret, longest value first."""
    own = environ is None
    environ = os.environ if environ is None else environ
    found = {(name, environ[name]) for name in key_variables(environ)
             if len(environ.get(name) or "") >= MIN_SECRET_LENGTH}
    if own:
        found |= {(name, value) for name, value in held_keys().items() if len(value) >= MIN_SECRET_LENGTH}
    found |= set(host_secret_values())
    return sorted(found, key=lambda item: -len(item[1]))


def _whole_token(value: str) -> re.Pattern[str]:
    return re.compile(f"(?<![{_TOKEN_CHARS}]){re.escape(value)}(?![{_TOKEN_CHARS}])")


def _whole_token_bytes(raw: bytes) -> re.Pattern[bytes]:
    return re.compile(f"(?<![{_TOKEN_CHARS}])".encode() + re.escape(raw) + f"(?![{_TOKEN_CHARS}])".encode())


def redact_text(text: str, secrets: Iterable[tuple[str, str]] | None = None) -> str:
    """``text`` with every known secret value replaced by ``[redacted NAME]`` (a short
    value only where it is a whole token; see the module docstring)."""
    for name, value in (secret_values() if secrets is None else secrets):
        if value not in text:
            continue
        if len(value) >= WHOLE_TOKEN_BELOW:
            text = text.replace(value, f"[redacted {name}]")
        else:
            text = _whole_token(value).sub(f"[redacted {name}]", text)
    return text


def redact(value: Any, secrets: list[tuple[str, str]] | None = None) -> Any:
    """A copy of a JSON-like value with secrets redacted in every string (keys too).
    Returns ``value`` itself when no secret is known."""
    secrets = secret_values() if secrets is None else secrets
    if not secrets:
        return value
    return _redact(value, secrets)


def _redact(value: Any, secrets: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {(_redact(k, secrets) if isinstance(k, str) else k): _redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v, secrets) for v in value]
    return value


def mask_bytes(data: bytes, secrets: Iterable[tuple[str, str]] | None = None) -> bytes:
    """``data`` with every secret's UTF-8 bytes replaced by as many ``*`` (same length,
    so offsets into a log stay right)."""
    for _, value in (secret_values() if secrets is None else secrets):
        raw = value.encode("utf-8", "surrogateescape")
        if raw not in data:
            continue
        if len(value) >= WHOLE_TOKEN_BELOW:
            data = data.replace(raw, b"*" * len(raw))
        else:
            data = _whole_token_bytes(raw).sub(b"*" * len(raw), data)
    return data
