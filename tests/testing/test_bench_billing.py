"""bench/_billing.py (the cost bench's tokens-as-billed rows): the published prompt-cache
rules applied to requests made of blocks, checked on small cases worked out by hand.

Not timed. Blocks are built with explicit token ids, so what is tested is the rules:
OpenAI's automatic prefix cache (1,024 tokens or more, steps of 128, no write charge)
and Anthropic's breakpoint cache (writes at 1.25x up to the last breakpoint of 1,024
tokens or more, reads at 0.1x of a prefix written before, found at a breakpoint or up to
20 blocks before one).
"""

from __future__ import annotations

from bench._billing import PRICES, Block, anthropic_bill, bill_of, blocks_of, openai_bill


def block(name: str, size: int, mark: bool = False) -> Block:
    """A block of ``size`` tokens whose ids are unique to ``name``."""
    base = sum(ord(c) for c in name) * 10_000
    return Block(text=name, tokens=tuple(range(base, base + size)), breakpoint=mark)


def test_openai_caches_the_longest_earlier_prefix_in_steps_of_128_from_1024() -> None:
    tools, system = block("tools", 900), block("system", 300)
    first = [tools, system, block("user", 50)]
    second = [*first, block("call", 40), block("result", 200)]
    small = [block("other", 500)]
    bill = openai_bill([first, second, small])
    one, two, three = bill.requests
    assert (one.total, one.cached) == (1250, 0)  # nothing before it
    # 1,250 shared tokens: 1,024 + one step of 128 (1,152); the other 98 are billed in full.
    assert (two.total, two.cached, two.repeated) == (1490, 1152, 1250)
    assert (three.cached, three.repeated) == (0, 0)  # a prefix under 1,024 tokens is never cached
    assert bill.written == 0
    price = PRICES["gpt-4.1"]
    assert abs(bill.cost(price) - ((1250 + 338 + 500) * 2.00 + 1152 * 0.50) / 1e6) < 1e-12


def test_openai_a_side_request_between_steps_does_not_cost_the_next_step_its_cache() -> None:
    prefix = [block("tools", 2000), block("system", 100)]
    step1 = [*prefix, block("user", 10)]
    title = [block("title prompt", 300)]
    step2 = [*step1, block("call", 10)]
    two = openai_bill([step1, title, step2]).requests[2]
    assert two.repeated == 0  # the request just before it was the side request
    assert two.cached == 1024 + (2110 - 1024) // 128 * 128  # the cache still holds step 1


def test_anthropic_writes_up_to_the_last_breakpoint_and_reads_it_on_the_next_request() -> None:
    tools, system = block("tools", 1000), block("system", 200, mark=True)
    first = [tools, system, block("user", 30, mark=True)]
    second = [tools, system, block("user", 30), block("call", 20), block("result", 50, mark=True)]
    one, two = anthropic_bill([first, second]).requests
    assert (one.total, one.cached, one.written) == (1230, 0, 1230)
    # The newest message's breakpoint moved on; the old one lies 2 blocks back: read.
    assert (two.total, two.cached, two.written, two.uncached) == (1300, 1230, 70, 0)
    price = PRICES["claude-sonnet-4-5"]
    bill = anthropic_bill([first, second])
    assert abs(bill.cost(price) - ((1230 + 70) * 3.75 + 1230 * 0.30) / 1e6) < 1e-12


def test_anthropic_caches_nothing_without_breakpoints_or_under_the_minimum() -> None:
    plain = [block("tools", 3000), block("user", 10)]
    short = [block("system", 500, mark=True), block("user", 10)]
    bill = anthropic_bill([plain, plain, short, short])
    assert [(r.cached, r.written) for r in bill.requests] == [(0, 0), (0, 0), (0, 0), (0, 0)]
    assert bill.requests[1].repeated == 3010  # repeated all the same: nothing marked it


def test_anthropic_looks_back_at_most_20_blocks_before_a_breakpoint() -> None:
    head = [block("system", 1100, mark=True)]
    first = [*head, block("m0", 5, mark=True)]
    later = [*head, block("m0", 5), *(block(f"m{i}", 5) for i in range(1, 22)), block("last", 5, mark=True)]
    near = [*head, block("m0", 5), *(block(f"m{i}", 5) for i in range(1, 19)), block("last", 5, mark=True)]
    far_bill = anthropic_bill([first, later]).requests[1]
    near_bill = anthropic_bill([first, near]).requests[1]
    assert far_bill.cached == 1100  # m0 is 22 blocks back: only the system breakpoint is found
    assert near_bill.cached == 1105  # m0 is 19 blocks back: found


def test_blocks_follow_the_wire_order_and_drop_the_cache_markers() -> None:
    marker = {"type": "ephemeral"}
    anthropic = {"model": "m", "max_tokens": 9,
                 "tools": [{"name": "read", "input_schema": {}}],
                 "system": [{"type": "text", "text": "be brief", "cache_control": marker}],
                 "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": marker}]}]}
    blocks = blocks_of(anthropic, "anthropic", lambda text: [ord(c) for c in text])
    assert [b.text for b in blocks] == ['{"name":"read","input_schema":{}}', '{"type":"text","text":"be brief"}',
                                        '{"role":"user","type":"text","text":"hi"}']
    assert [b.breakpoint for b in blocks] == [False, True, True]
    chat = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
            "tools": [{"type": "function"}]}
    assert [b.text for b in blocks_of(chat, "chat", list)] == [
        '{"type":"function"}', '{"role":"system","content":"s"}', '{"role":"user","content":"u"}']
    responses = {"instructions": "i", "input": [{"role": "user", "content": "u"}]}
    assert [b.text for b in blocks_of(responses, "responses", list)] == [
        '{"role":"instructions","content":"i"}', '{"role":"user","content":"u"}']
    # The same request twice on Chat Completions: the second is served from the cache.
    long_chat = {"messages": [{"role": "system", "content": "x" * 2000}]}
    bill = bill_of([long_chat, long_chat], "chat", lambda text: [ord(c) for c in text])
    assert bill.requests[1].cached == 1024 + (bill.requests[1].total - 1024) // 128 * 128
