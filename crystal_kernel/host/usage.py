"""Token usage and cost (/usage).

Usage is counted per reply in ``session.usage`` (host/session.py ``Usage``): session
totals, one row per turn (the agent's own tokens and model), and breakdowns per model
and per purpose (turn, review, compaction, topic). Cost comes from config ``prices``::

    "prices": {"gpt-4.1": {"input": 2.0, "output": 8.0},
               "anthropic:claude-sonnet-*": {"input": 3.0, "output": 15.0}}

in US dollars per million tokens. A key is a model name, ``provider:model``, or a glob
of either; the exact name wins over a glob. Models without a price are listed as such.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.commands import UsageResult

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


@dataclass(frozen=True)
class Price:
    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


def _as_price(value: Any) -> Price | None:
    if not isinstance(value, dict):
        return None
    try:
        inp, out = value.get("input", 0), value.get("output", 0)
        if isinstance(inp, bool) or isinstance(out, bool):
            return None
        price = Price(float(inp), float(out))
    except (TypeError, ValueError):
        return None
    return price if price.input >= 0 and price.output >= 0 else None


def price_for(prices: dict[str, Any] | None, model: str, provider: str | None = None) -> Price | None:
    """The price of ``model`` from the table, or None when it is not known (or invalid)."""
    if not isinstance(prices, dict) or not model:
        return None
    names = [model] + ([f"{provider}:{model}"] if provider else [])
    for name in reversed(names):  # provider:model is the more specific exact key
        if name in prices:
            return _as_price(prices[name])
    for key, value in prices.items():
        if any(ch in key for ch in "*?[") and any(fnmatch.fnmatchcase(n, key) for n in names):
            return _as_price(value)
    return None


def _provider_name(session: Session) -> str | None:
    return getattr(session.provider, "name", None)


def cost_breakdown(session: Session) -> tuple[float | None, list[str]]:
    """(cost of the priced models, models without a price)."""
    usage = session.usage
    rows = dict(getattr(usage, "by_model", {}) or {})
    if not rows and (usage.input_tokens or usage.output_tokens):
        # An older session document: everything is counted against the current model.
        rows = {session.provider.model: {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}}
    prices = session.config.prices or {}
    total: float | None = None
    unknown: list[str] = []
    provider = _provider_name(session)
    for model, row in rows.items():
        price = price_for(prices, model, provider)
        if price is None:
            unknown.append(model)
            continue
        total = (total or 0.0) + price.cost(int(row.get("inputTokens", 0)), int(row.get("outputTokens", 0)))
    return total, unknown


def turn_cost(session: Session, turn: dict[str, Any]) -> float | None:
    price = price_for(session.config.prices or {}, str(turn.get("model") or session.provider.model),
                      _provider_name(session))
    if price is None:
        return None
    return price.cost(int(turn.get("inputTokens", 0)), int(turn.get("outputTokens", 0)))


def _money(value: float | None) -> str:
    return "no price" if value is None else f"${value:.4f}"


def usage_report(session: Session) -> dict[str, Any]:
    """Structured usage for rich fronts (the sidebar) and tests."""
    u = session.usage
    cost, unknown = cost_breakdown(session)
    last = u.turns[-1] if u.turns else None
    return {
        "inputTokens": u.input_tokens, "outputTokens": u.output_tokens,
        "reasoningTokens": getattr(u, "reasoning_tokens", 0), "turns": len(u.turns),
        "lastTurn": last, "lastTurnCost": turn_cost(session, last) if last else None,
        "cost": cost, "unpricedModels": unknown,
        "byPurpose": dict(getattr(u, "by_purpose", {}) or {}), "byModel": dict(getattr(u, "by_model", {}) or {}),
    }


def usage_command(session: Session) -> UsageResult:
    """/usage: tokens for the last turn and the session, with cost where prices are known."""

    u = session.usage
    report = usage_report(session)
    # The total first, written as the turn's status line writes it (input + output, every
    # request of the session): the two must read as the same number.
    turns = f"{len(u.turns)} turn" + ("" if len(u.turns) == 1 else "s")
    lines = [f"Session {session.id}: {u.total:,} tokens ({u.input_tokens:,} input + {u.output_tokens:,} output) "
             f"over {turns}."]
    if report["reasoningTokens"]:
        # Reasoning is billed as output: it is part of the output count, shown apart.
        lines.append(f"Reasoning: {report['reasoningTokens']:,} of the output tokens.")
    last = report["lastTurn"]
    if last:
        thought = f", {last['reasoningTokens']:,} of them reasoning" if last.get("reasoningTokens") else ""
        lines.append(f"Last turn: {last.get('inputTokens', 0):,} input + {last.get('outputTokens', 0):,} output"
                     f"{thought} ({_money(report['lastTurnCost'])}).")
    side = {k: v for k, v in report["byPurpose"].items() if k != "turn"}
    if side:
        parts = [f"{k} {v['inputTokens']:,} + {v['outputTokens']:,}" for k, v in sorted(side.items())]
        lines.append("Side requests (input + output): " + ", ".join(parts) + ".")
    cost, unknown = report["cost"], report["unpricedModels"]
    if cost is not None:
        lines.append(f"Cost: ${cost:.4f}" + (f" (no price for {', '.join(unknown)})" if unknown else ""))
    else:
        lines.append("Cost: no price known for " + (", ".join(unknown) if unknown else "this model")
                     + " (set config 'prices': {\"MODEL\": {\"input\": USD per million, \"output\": USD per million}}).")
    return UsageResult("\n".join(lines), usage=report)
