"""Token usage and cost (/usage). Prices come from config ``prices``:
``{"MODEL": {"input": USD per million tokens, "output": USD per million tokens}}``."""

from __future__ import annotations

from typing import Any


def session_cost(session: Any) -> float | None:
    price = (session.config.prices or {}).get(session.provider.model)
    if not isinstance(price, dict):
        return None
    try:
        return (session.usage.input_tokens * float(price.get("input", 0))
                + session.usage.output_tokens * float(price.get("output", 0))) / 1_000_000
    except (TypeError, ValueError):
        return None


def usage_command(session: Any, args: list[str]) -> str:
    u = session.usage
    lines = [f"Session {session.id}: {u.input_tokens} input + {u.output_tokens} output tokens "
             f"over {len(u.turns)} turns."]
    if u.turns:
        last = u.turns[-1]
        lines.append(f"Last turn: {last.get('inputTokens', 0)} input + {last.get('outputTokens', 0)} output.")
    cost = session_cost(session)
    lines.append(f"Cost: ${cost:.4f}" if cost is not None else "Cost: no price known for this model "
                 "(set config 'prices').")
    return "\n".join(lines)
