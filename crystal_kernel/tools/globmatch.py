"""Linear-time glob matching (ROBUST-3).

A glob chosen by the model (``glob``, ``grep``'s filter) or written in a workspace's
``.gitignore`` used to become a Python regex; ``a*a*a*a*a*a*a*a*b`` then backtracks
polynomially on a long name and holds the interpreter for minutes, deaf to interrupts.
Here a glob is a list of tokens run as a set of states over the text (an NFA
simulation): O(len(text) × len(tokens)) per alternative, never worse.

Dialect (the same as the regex translation it replaces): ``*`` any run without ``/``,
``?`` one character but ``/``, ``[...]``/``[!...]`` a class (never ``/`` when negated),
``**/`` zero or more folders at the start or after ``/``, a final ``**`` after ``/``
anything, ``\\x`` a literal, and with ``braces`` ``{a,b}`` alternatives (expanded; at
most :data:`MAX_ALTERNATIVES`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_ALTERNATIVES = 256

_LIT, _ANY1, _CLASS, _STAR, _ANY, _DIRS = range(6)


@dataclass(frozen=True)
class _Token:
    kind: int
    char: str = ""
    klass: re.Pattern[str] | None = None


# Python's regex engine is several times faster per character than the automaton below
# but backtracks: with at most this many unbounded parts (``*``, ``**``, ``**/``) per
# alternative and a text of at most REGEX_TEXT_LIMIT characters its worst case stays
# within milliseconds, so such matches use it; everything else runs the automaton.
REGEX_MAX_UNBOUNDED = 2
REGEX_TEXT_LIMIT = 1024


class GlobMatcher:
    """A compiled glob; :meth:`match` tells whether a whole text matches."""

    def __init__(self, alternatives: list[list[_Token]]) -> None:
        self._automata = [_Automaton(tokens) for tokens in alternatives]
        simple = all(sum(t.kind in (_STAR, _ANY, _DIRS) for t in tokens) <= REGEX_MAX_UNBOUNDED
                     for tokens in alternatives)
        self._regex = re.compile("^(?:" + "|".join(_regex(tokens) for tokens in alternatives) + ")$",
                                 re.DOTALL) if simple and len(alternatives) <= 16 else None

    def match(self, text: str) -> bool:
        if self._regex is not None and len(text) <= REGEX_TEXT_LIMIT:
            return self._regex.match(text) is not None
        return any(automaton.match(text) for automaton in self._automata)


def _regex(tokens: list[_Token]) -> str:
    parts = {_ANY1: "[^/]", _STAR: "[^/]*", _ANY: ".*", _DIRS: "(?:.*/)?"}
    out = []
    for token in tokens:
        if token.kind == _LIT:
            out.append(re.escape(token.char))
        elif token.kind == _CLASS:
            out.append(token.klass.pattern if token.klass is not None else "(?!)")
        else:
            out.append(parts[token.kind])
    return "".join(out)


class _Automaton:
    """The token automaton of one alternative, determinised lazily: each (state set,
    character) step is computed once and cached (bounded), so matching costs one dict
    lookup per character once warm."""

    CACHE_LIMIT = 20_000

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.start = _closure(tokens, {(0, False)})
        self.cache: dict[tuple[frozenset[tuple[int, bool]], str], frozenset[tuple[int, bool]]] = {}

    def match(self, text: str) -> bool:
        states = self.start
        cache = self.cache
        for ch in text:
            key = (states, ch)
            following = cache.get(key)
            if following is None:
                following = _step(self.tokens, states, ch)
                if len(cache) < self.CACHE_LIMIT:
                    cache[key] = following
            if not following:
                return False
            states = following
        return (len(self.tokens), False) in states


def compile_glob_matcher(pattern: str, *, anchored: bool = True, braces: bool = False) -> GlobMatcher:
    """Compile ``pattern`` to match whole POSIX paths; ``anchored=False`` also lets it
    match after any ``folder/`` prefix (a gitignore pattern without ``/``)."""
    texts = expand_braces(pattern) if braces else [pattern]
    alternatives = []
    for text in texts:
        tokens = _tokens(text)
        if not anchored:
            tokens.insert(0, _Token(_DIRS))
        alternatives.append(tokens)
    return GlobMatcher(alternatives)


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``abd``, ``acd`` (nested too), at most MAX_ALTERNATIVES results;
    a brace without a matching close or a comma stays literal."""
    out: list[str] = []
    pending = [pattern]
    while pending:
        text = pending.pop()
        found = _first_group(text)
        if found is None:
            out.append(text)
        else:
            start, end, options = found
            pending.extend(text[:start] + option + text[end + 1:] for option in reversed(options))
        if len(out) + len(pending) > MAX_ALTERNATIVES:
            raise ValueError(f"the pattern expands to more than {MAX_ALTERNATIVES} alternatives")
    return out


def _first_group(text: str) -> tuple[int, int, list[str]] | None:
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth, j, parts, last = 1, i + 1, [], i + 1
            while j < len(text) and depth:
                d = text[j]
                if d == "\\":
                    j += 2
                    continue
                if d == "{":
                    depth += 1
                elif d == "}":
                    depth -= 1
                    if depth == 0:
                        break
                elif d == "," and depth == 1:
                    parts.append(text[last:j])
                    last = j + 1
                j += 1
            if depth == 0 and parts:
                parts.append(text[last:j])
                return i, j, parts
        i += 1
    return None


def _tokens(pattern: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                start_ok = i == 0 or pattern[i - 1] == "/"
                if start_ok and pattern.startswith("**/", i):
                    out.append(_Token(_DIRS))
                    i += 3
                    continue
                if start_ok and i + 2 == n:
                    out.append(_Token(_ANY))
                    i += 2
                    continue
                i += 1  # "**" inside a name is one "*"
            out.append(_Token(_STAR))
        elif c == "?":
            out.append(_Token(_ANY1))
        elif c == "[":
            token, i = _char_class(pattern, i)
            out.append(token)
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(_Token(_LIT, pattern[i]))
        else:
            out.append(_Token(_LIT, c))
        i += 1
    # Runs of stars are one star (fewer states, same language).
    squeezed: list[_Token] = []
    for token in out:
        if token.kind == _STAR and squeezed and squeezed[-1].kind == _STAR:
            continue
        squeezed.append(token)
    return squeezed


def _char_class(pattern: str, i: int) -> tuple[_Token, int]:
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] in "!^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1
    while j < n and pattern[j] != "]":
        j += 1
    if j >= n:
        return _Token(_LIT, "["), i
    body = pattern[i + 1:j]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\").replace("^", "\\^")
    try:
        klass = re.compile(f"[^/{body}]" if negate else f"[{body}]", re.DOTALL)
    except re.error:
        return _Token(_LIT, "["), i
    return _Token(_CLASS, klass=klass), j


def _closure(tokens: list[_Token], states: set[tuple[int, bool]]) -> frozenset[tuple[int, bool]]:
    """Add the states reachable without reading: past a ``*``, ``**`` or ``**/``. A state
    is (index, inside) where ``inside`` marks being within the folders ``**/`` consumes."""
    end = len(tokens)
    stack = list(states)
    while stack:
        index, inside = stack.pop()
        if index < end and not inside and tokens[index].kind in (_STAR, _ANY, _DIRS):
            nxt = (index + 1, False)
            if nxt not in states:
                states.add(nxt)
                stack.append(nxt)
    return frozenset(states)


def _step(tokens: list[_Token], states: frozenset[tuple[int, bool]], ch: str) -> frozenset[tuple[int, bool]]:
    end = len(tokens)
    following: set[tuple[int, bool]] = set()
    for index, _inside in states:
        if index == end:
            continue
        token = tokens[index]
        kind = token.kind
        if kind == _LIT:
            if ch == token.char:
                following.add((index + 1, False))
        elif kind == _ANY1:
            if ch != "/":
                following.add((index + 1, False))
        elif kind == _CLASS:
            if token.klass is not None and token.klass.fullmatch(ch):
                following.add((index + 1, False))
        elif kind == _STAR:
            if ch != "/":
                following.add((index, False))
        elif kind == _ANY:
            following.add((index, False))
        else:  # _DIRS: any characters, left only through a "/"
            following.add((index, True))
            if ch == "/":
                following.add((index + 1, False))
    return _closure(tokens, following) if following else frozenset()
