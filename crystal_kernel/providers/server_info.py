"""Asking a local model server for its context window.

The capability table (common.py) cannot know a local model's window, and the server
usually serves less than the model could take. Each server says it its own way:

- vLLM: ``GET /v1/models`` lists the model with ``max_model_len``;
- llama.cpp's ``llama-server``: ``GET /props`` has ``default_generation_settings.n_ctx``
  (what it serves); ``GET /v1/models`` has ``meta.n_ctx_train`` (what the model was
  trained for) as a fallback;
- Ollama: ``POST /api/show {"model"}`` has ``parameters`` (``num_ctx N`` when set) and
  ``model_info["<arch>.context_length"]``;
- LM Studio: ``GET /api/v0/models/<model>`` has ``loaded_context_length``.

The four questions go out together (the answers are read in the order above). Each is
one short request that ends within ``PROBE_TIMEOUT`` seconds, and the probe as a whole
ends by its deadline (the provider's ``requestTimeoutSeconds``, SPEC
§13 "Waits"): both are wall-clock limits, so a server (or a gateway in front of a stuck
upstream) that keeps a probe alive with SSE keep-alive comments cannot hold the turn. A
server that answers none of them leaves the table's guess in place. Nothing here raises.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.deadline import within

# The SDKs' own HTTP client (httpx2, the same API as httpx): already loaded when a
# provider asks, where importing httpx itself cost ~0.2 s of ``crystal run``'s start.
if TYPE_CHECKING:  # checked against httpx2; httpx has the same API
    import httpx2 as httpx
else:
    try:
        import httpx2 as httpx
    except ImportError:  # an SDK that still uses httpx
        import httpx

PROBE_TIMEOUT = 3.0


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _entry(models: Any, model: str) -> dict[str, Any] | None:
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        return None
    entries = [d for d in data if isinstance(d, dict)]
    named = [d for d in entries if d.get("id") == model]
    found = named or (entries if len(entries) == 1 else [])
    return found[0] if found else None


def _ollama(show: Any) -> int | None:
    if not isinstance(show, dict):
        return None
    match = re.search(r"^\s*num_ctx\s+(\d+)", str(show.get("parameters") or ""), re.MULTILINE)
    if match:
        return int(match.group(1))
    info = show.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if key.endswith(".context_length") and _int(value):
                return int(value)
    return None


async def context_window(base_url: str, model: str, api_key: str | None = None,
                         deadline: float | None = None) -> tuple[int, str] | None:
    """(tokens, how it was learned) from the server at ``base_url`` (a ``…/v1`` URL), or
    None; None too when ``deadline`` seconds pass first."""
    try:
        # core.deadline.within, not asyncio.wait_for: wait_for can lose the turn's cancel
        # when it arrives as the probe ends.
        return await within(_probe(base_url, model, api_key), deadline)
    except TimeoutError:
        return None


async def _probe(base_url: str, model: str, api_key: str | None) -> tuple[int, str] | None:
    base = base_url.rstrip("/")
    root = base[:-3] if base.endswith("/v1") else base
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}

    async def get_json(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> Any:
        try:
            # httpx's timeout bounds each read, and a keep-alive resets it: the whole
            # request (body included) gets PROBE_TIMEOUT of wall clock.
            response = await within(client.request(method, url, headers=headers, **kwargs), PROBE_TIMEOUT)
            return response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, OSError, TimeoutError):
            return None

    # A plain-http server (every local one) needs no TLS: without verify=False the client
    # loads the system's CA certificates first (~20-40 ms of `crystal run`'s start). The
    # probe follows no redirects (httpx's default), so it never reaches an https URL.
    plain = base.lower().startswith("http://")
    # The four questions go out together and are read in this order: the probe takes one
    # round trip, not four (it runs beside a new conversation's first request, and the
    # second step waits for its answer: docs/benchmarks.md).
    async with httpx.AsyncClient(timeout=PROBE_TIMEOUT, verify=not plain, follow_redirects=False) as client:
        models, props, show, studio = await asyncio.gather(
            get_json(client, "GET", base + "/models"),
            get_json(client, "GET", root + "/props"),
            get_json(client, "POST", root + "/api/show", json={"model": model}),
            get_json(client, "GET", f"{root}/api/v0/models/{model}"))
    entry = _entry(models, model)
    if entry is not None and _int(entry.get("max_model_len")):
        return int(entry["max_model_len"]), "vLLM max_model_len"
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        n_ctx = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
        if n_ctx:
            return n_ctx, "llama.cpp n_ctx"
    meta = entry.get("meta") if entry is not None else None
    if isinstance(meta, dict) and _int(meta.get("n_ctx_train")):
        return int(meta["n_ctx_train"]), "llama.cpp n_ctx_train"
    tokens = _ollama(show)
    if tokens:
        return tokens, "Ollama /api/show"
    if isinstance(studio, dict):
        for key in ("loaded_context_length", "max_context_length"):
            if _int(studio.get(key)):
                return int(studio[key]), f"LM Studio {key}"
    return None
