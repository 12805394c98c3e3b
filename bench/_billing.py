"""Input tokens as providers bill them: what a prompt cache serves again, and at what price.

Every step of an agent sends the whole conversation again, so most of a request repeats
the one before it. Providers bill that repeated prefix at a discount when their prompt
cache holds it; how much is cached depends on the wire:

- **OpenAI** (Chat Completions, Responses) caches on its own: a request whose first
  1,024 or more tokens match an earlier request's is served from the cache for the
  longest such prefix, counted in steps of 128 tokens; there is no charge to write.
- **Anthropic Messages** caches only at ``cache_control`` breakpoints (up to four per
  request): the prefix up to a breakpoint is written at 1.25x the input price (5-minute
  entries) when it holds at least 1,024 tokens, and a later request whose prefix up to one
  of its breakpoints — or up to a block boundary at most 20 blocks before it — matches a
  written one reads it at 0.1x.

A request is read as a list of :class:`Block`\\ s in the order the provider reads it
(tools, then the system text, then each message's content), each the compact JSON of one
tool, system block or content block, without its ``cache_control`` marker (the marker
says where to cache, it is not content). This is a model of the published rules, not the
providers' own tokenizers or cache placement: the same model for every agent, so the
comparison is fair, while the absolute figures are estimates.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

OPENAI_MIN = 1024
OPENAI_STEP = 128
ANTHROPIC_MIN = 1024  # Claude Sonnet's and Opus's minimum cacheable prompt
ANTHROPIC_LOOKBACK = 20


@dataclass(frozen=True)
class Price:
    """Published prices in USD per million input tokens: uncached, served from the
    cache, and written to it (Anthropic's 5-minute entries; OpenAI bills no writes)."""

    model: str
    uncached: float
    cached: float
    write: float


# Published list prices (USD per million input tokens), the models the bench's agents
# are configured with: opencode and crystal on Chat Completions gpt-4.1, Codex gpt-5,
# Claude Code and crystal on Anthropic claude-sonnet-4-5.
PRICES = {
    "gpt-4.1": Price("gpt-4.1", uncached=2.00, cached=0.50, write=2.00),
    "gpt-5": Price("gpt-5", uncached=1.25, cached=0.125, write=1.25),
    "claude-sonnet-4-5": Price("claude-sonnet-4-5", uncached=3.00, cached=0.30, write=3.75),
}


@dataclass(frozen=True)
class Block:
    """One unit a request is made of, as the cache sees it."""

    text: str
    tokens: tuple[int, ...]
    breakpoint: bool = False


@dataclass
class Billed:
    """One request's input tokens by how they are billed; ``repeated``: how many of its
    first tokens are the previous request's first tokens (whatever any cache does)."""

    total: int
    cached: int = 0
    written: int = 0
    repeated: int = 0

    @property
    def uncached(self) -> int:
        return self.total - self.cached - self.written


@dataclass
class Bill:
    """A task's requests, billed."""

    requests: list[Billed] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(r.total for r in self.requests)

    @property
    def cached(self) -> int:
        return sum(r.cached for r in self.requests)

    @property
    def written(self) -> int:
        return sum(r.written for r in self.requests)

    def repeated_share(self) -> float:
        """Of every request after the first, the share of its tokens that repeats the
        previous request's prefix (token-weighted)."""
        later = self.requests[1:]
        size = sum(r.total for r in later)
        return sum(r.repeated for r in later) / size if size else 0.0

    def cost(self, price: Price) -> float:
        """USD for the task's input at ``price``."""
        uncached = sum(r.uncached for r in self.requests)
        return (uncached * price.uncached + self.cached * price.cached + self.written * price.write) / 1e6


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _unmarked(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict) and "cache_control" in value:
        return {k: v for k, v in value.items() if k != "cache_control"}, True
    return value, False


def blocks_of(body: dict[str, Any], wire: str, encode: Callable[[str], Sequence[int]]) -> list[Block]:
    """The request ``body`` as the cache reads it (``wire``: chat, responses or anthropic);
    ``encode``: text to token ids."""
    items: list[Any] = list(body.get("tools") or [])
    for key in ("system", "instructions"):
        value = body.get(key)
        if isinstance(value, list):
            items += value
        elif value:
            items.append({"role": key, "content": value})
    for message in body.get("messages" if wire != "responses" else "input") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if wire == "anthropic" and isinstance(content, list):
            role = message.get("role")
            items += [{"role": role, **block} if isinstance(block, dict) else block for block in content]
        else:
            items.append(message)
    blocks = []
    for item in items:
        plain, marked = _unmarked(item)
        text = _compact(plain)
        blocks.append(Block(text=text, tokens=tuple(encode(text)), breakpoint=marked))
    return blocks


def _flat(blocks: list[Block]) -> list[int]:
    return [token for block in blocks for token in block.tokens]


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def openai_bill(requests: list[list[Block]]) -> Bill:
    """OpenAI's automatic caching over the task's requests, in order."""
    bill = Bill()
    seen: list[list[int]] = []
    for blocks in requests:
        tokens = _flat(blocks)
        longest = max((_common(tokens, earlier) for earlier in seen), default=0)
        cached = OPENAI_MIN + (longest - OPENAI_MIN) // OPENAI_STEP * OPENAI_STEP if longest >= OPENAI_MIN else 0
        repeated = _common(tokens, seen[-1]) if seen else 0
        bill.requests.append(Billed(total=len(tokens), cached=cached, repeated=repeated))
        seen.append(tokens)
    return bill


def anthropic_bill(requests: list[list[Block]]) -> Bill:
    """Anthropic's breakpoint caching over the task's requests, in order."""
    bill = Bill()
    entries: set[int] = set()  # the prefixes written, by the hash of their blocks
    previous: list[int] = []
    for blocks in requests:
        ends, keys, end, key = [], [], 0, 0
        for block in blocks:
            end += len(block.tokens)
            key = hash((key, block.text))
            ends.append(end)
            keys.append(key)
        marks = [i for i, block in enumerate(blocks) if block.breakpoint]
        read = 0
        for mark in marks:
            for i in range(mark, max(-1, mark - ANTHROPIC_LOOKBACK - 1), -1):
                if keys[i] in entries:
                    read = max(read, ends[i])
                    break
        cacheable = [m for m in marks if ends[m] >= ANTHROPIC_MIN]
        written = max(0, ends[cacheable[-1]] - read) if cacheable else 0
        entries.update(keys[m] for m in cacheable)
        tokens = _flat(blocks)
        bill.requests.append(Billed(total=end, cached=read, written=written, repeated=_common(tokens, previous)))
        previous = tokens
    return bill


def bill_of(bodies: list[dict[str, Any]], wire: str, encode: Callable[[str], Sequence[int]]) -> Bill:
    """The task's request bodies, in the order sent, billed by ``wire``'s rules."""
    requests = [blocks_of(body, wire, encode) for body in bodies]
    return anthropic_bill(requests) if wire == "anthropic" else openai_bill(requests)
