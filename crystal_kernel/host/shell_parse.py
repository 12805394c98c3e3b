"""A small, conservative shell tokenizer for the approval path (GUARD-1).

It does not run anything and does not try to be bash. It finds every *simple command*
in a command line, nested ones included (pipelines, lists, subshells, groups, ``$(…)``,
backticks, ``<(…)``, ``${…}`` and here-documents), and gives each one's words after
quote removal, with assignments and redirections taken out. Whatever it cannot read with
confidence sets :attr:`ParsedShell.unsure` with one English reason; callers must then
not let the command pass a check silently (docs/approval.md).

Why our own: ``bashlex`` (the usual choice) has had no release since 2023 and is GPL-3,
and this project is MIT. The subset below is what agents send; the rest is "unsure".
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Bounds: a command line longer than this, nested deeper, or holding more simple
# commands is "unsure" rather than parsed (bounded time and memory).
MAX_SOURCE = 200_000
MAX_DEPTH = 24
MAX_COMMANDS = 2_000

_OPERATOR_CHARS = ";&|\n"
_BLANKS = " \t\r"
_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b",
                 "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


@dataclass
class Word:
    """One shell word after quote removal. ``dynamic``: its value depends on an expansion
    (``$X``, ``$(…)``, backticks), so the host cannot know it. ``brace``: it holds an
    unquoted ``{a,b}`` brace expansion."""

    text: str = ""
    dynamic: bool = False
    brace: bool = False
    started: bool = False


@dataclass
class SimpleCommand:
    """One simple command: its words (quotes removed, no assignments or redirections),
    and ``source``, the command as written (redirections included)."""

    words: list[Word]
    source: str

    @property
    def argv(self) -> list[str]:
        return [w.text for w in self.words]


@dataclass
class ParsedShell:
    """Every simple command of a command line, outer ones before the ones nested in them."""

    commands: list[SimpleCommand] = field(default_factory=list)
    unsure: str | None = None


class _Unsure(Exception):
    pass


def parse_shell(source: str) -> ParsedShell:
    """Parse ``source``; never raises. See the module docstring."""
    out = ParsedShell()
    if len(source) > MAX_SOURCE:
        out.unsure = f"the command is longer than {MAX_SOURCE} characters"
        return out
    try:
        _Parser(source, out.commands, 0).parse_list(stop=None)
    except _Unsure as exc:
        out.unsure = str(exc)
    except RecursionError:
        out.unsure = "the command is nested too deeply"
    return out


@dataclass
class _ListState:
    """Where :meth:`_Parser.parse_list` is in the simple command it reads: its words so
    far, the word being read, where the command started, the subshells open in it, and
    whether the next word is a redirection's target (not a word of the command)."""

    start: int
    words: list[Word] = field(default_factory=list)
    cur: Word = field(default_factory=Word)
    parens: int = 0
    expect_redirect_target: bool = False

    def finish_word(self) -> None:
        """The word being read ends: a command word, or the redirection's target."""
        if self.cur.started:
            if self.expect_redirect_target:
                self.expect_redirect_target = False
            else:
                self.words.append(self.cur)
        self.cur = Word()


class _Parser:
    def __init__(self, source: str, sink: list[SimpleCommand], depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _Unsure("the command is nested too deeply")
        self.s = source
        self.i = 0
        self.sink = sink
        self.depth = depth
        self.heredocs: list[tuple[str, bool, bool]] = []

    # ----- nested parsing -------------------------------------------------------------

    def nested(self, text: str) -> None:
        """Parse ``text`` (a substitution's body) as a command list of its own."""
        _Parser(text, self.sink, self.depth + 1).parse_list(stop=None)

    def nested_until_paren(self) -> int:
        """Parse from ``self.i`` to the ``)`` closing a ``$(`` / ``<(``; returns the
        index after it."""
        sub = _Parser(self.s, self.sink, self.depth + 1)
        sub.i = self.i
        sub.parse_list(stop=")")
        return sub.i

    # ----- the command list -----------------------------------------------------------

    def parse_list(self, stop: str | None) -> None:
        """Parse simple commands from ``self.i`` to the end, or, ``stop`` being ``")"``,
        to the ``)`` that closes the list (``self.i`` is then just after it)."""
        st = _ListState(start=self.i)
        while self.i < len(self.s):
            if self._step(st, stop):
                return
        self.end_command(st, len(self.s))
        if stop == ")":
            raise _Unsure("a '$(' or '(' is not closed")
        if st.parens:
            raise _Unsure("a '(' is not closed")
        self.check_heredocs_done()

    def _step(self, st: _ListState, stop: str | None) -> bool:
        """Read what starts at ``self.i``; True when it was the ``)`` ending the list."""
        s = self.s
        c = s[self.i]
        cur = st.cur
        if c in _BLANKS:
            st.finish_word()
            self.i += 1
        elif c == "\\" and s.startswith("\\\n", self.i):
            self.i += 2
        elif c == "#" and not cur.started:
            while self.i < len(s) and s[self.i] != "\n":
                self.i += 1
        elif c in _OPERATOR_CHARS:
            self._operator(st, c)
        elif c in "<>":
            self._angle(st)
        elif c == "(":
            self._open_paren(st)
        elif c == ")":
            return self._close_paren(st, stop)
        else:
            self.word_part(cur)
        return False

    def end_command(self, st: _ListState, end: int) -> None:
        """The simple command being read ends before ``end``: keep it, if it has words."""
        st.finish_word()
        if st.expect_redirect_target:
            raise _Unsure("a redirection has no target")
        if st.words:
            self.emit(st.words, self.s[st.start:end])
        st.words = []

    def _operator(self, st: _ListState, c: str) -> None:
        """``;``, ``&``, ``|`` or a newline (or ``&>``, a redirection)."""
        s = self.s
        if c == "&" and s.startswith("&>", self.i):
            st.finish_word()
            self.i += 3 if s.startswith("&>>", self.i) else 2
            st.expect_redirect_target = True
            return
        self.end_command(st, self.i)
        self.i += 2 if s[self.i:self.i + 2] in ("&&", "||", "|&", ";;") else 1
        if c == "\n":
            self.read_heredocs()
        st.start = self.i

    def _angle(self, st: _ListState) -> None:
        """``<`` or ``>``: a redirection, or a process substitution ``<(…)`` / ``>(…)``."""
        s = self.s
        cur = st.cur
        if self.i + 1 < len(s) and s[self.i + 1] == "(" and not cur.started:
            # Process substitution <(…) / >(…): an argument whose body runs.
            self.i += 2
            cur.started = cur.dynamic = True
            cur.text += "<(…)"
            self.i = self.nested_until_paren()
            return
        if cur.started and cur.text.isdigit() and not cur.dynamic:
            st.cur = Word()  # "2>" : the digits name a file descriptor
        else:
            st.finish_word()
        st.expect_redirect_target = self.redirection()

    def _open_paren(self, st: _ListState) -> None:
        """``(``: a subshell, or an array assignment's value; a function definition is unsure."""
        cur = st.cur
        if cur.started:
            if cur.text.endswith("=") and not st.words:
                # Array assignment a=(x y): its words are data.
                self.i = self.skip_balanced(self.i + 1)
                cur.text += "(…)"
                return
            raise _Unsure("function definitions are not checked")
        self.end_command(st, self.i)
        st.parens += 1
        self.i += 1
        st.start = self.i

    def _close_paren(self, st: _ListState, stop: str | None) -> bool:
        """``)``: closes a subshell, or the list itself (True) when it is a ``$(``'s."""
        self.end_command(st, self.i)
        self.i += 1
        if st.parens:
            st.parens -= 1
            st.start = self.i
            return False
        if stop == ")":
            self.check_heredocs_done()
            return True
        raise _Unsure("a ')' has no matching '('")

    def check_heredocs_done(self) -> None:
        if self.heredocs:
            raise _Unsure("a here-document has no body")

    def emit(self, words: list[Word], source: str) -> None:
        head = words[0].text if not words[0].dynamic else ""
        if head in ("case", "function", "select", "coproc", "alias"):
            raise _Unsure(f"'{head}' constructs are not checked")
        if len(self.sink) >= MAX_COMMANDS:
            raise _Unsure("the command holds too many simple commands")
        self.sink.append(SimpleCommand(list(words), source.strip()))

    # ----- redirections and here-documents ----------------------------------------------

    def redirection(self) -> bool:
        """Consume one redirection operator; True when a target word follows (a
        here-document's delimiter is consumed here)."""
        s = self.s
        for op in ("<<<", "<<-", "&>>", "<<", ">>", "<>", ">|", "<&", ">&", "<", ">"):
            if s.startswith(op, self.i):
                self.i += len(op)
                break
        if op in ("<<", "<<-"):
            while self.i < len(s) and s[self.i] in _BLANKS:
                self.i += 1
            delim = Word()
            begin = self.i
            while self.i < len(s) and s[self.i] not in _BLANKS + _OPERATOR_CHARS + "<>()":
                self.word_part(delim)
            if not delim.started:
                raise _Unsure("a here-document has no delimiter")
            quoted = any(q in s[begin:self.i] for q in "'\"\\")
            self.heredocs.append((delim.text, not quoted, op == "<<-"))
            return False
        return True

    def read_heredocs(self) -> None:
        s = self.s
        for delim, expand, strip_tabs in self.heredocs:
            body_start = self.i
            while True:
                if self.i >= len(s):
                    body = s[body_start:]
                    break
                end = s.find("\n", self.i)
                line_end = len(s) if end < 0 else end
                line = s[self.i:line_end]
                if (line.lstrip("\t") if strip_tabs else line) == delim:
                    body = s[body_start:self.i]
                    self.i = line_end + 1 if end >= 0 else line_end
                    break
                self.i = line_end + 1 if end >= 0 else line_end
            if expand:
                self.scan_expansions(body)
        self.heredocs = []

    def scan_expansions(self, text: str) -> None:
        """Find the command substitutions in text that the shell expands like the inside
        of double quotes (an unquoted here-document's body)."""
        sub = _Parser(text, self.sink, self.depth + 1)
        scratch = Word()
        while sub.i < len(text):
            c = text[sub.i]
            if c == "\\":
                sub.i += 2
            elif c == "$":
                sub.dollar(scratch)
            elif c == "`":
                sub.backtick(scratch)
            else:
                sub.i += 1

    # ----- words ------------------------------------------------------------------------

    def word_part(self, w: Word) -> None:
        s = self.s
        c = s[self.i]
        w.started = True
        if c == "'":
            end = s.find("'", self.i + 1)
            if end < 0:
                raise _Unsure("a single quote is not closed")
            w.text += s[self.i + 1:end]
            self.i = end + 1
        elif c == '"':
            self.double_quoted(w)
        elif c == "\\":
            w.text += s[self.i + 1:self.i + 2]
            self.i += 2
        elif c == "$":
            self.dollar(w)
        elif c == "`":
            self.backtick(w)
        elif c == "{" and self.brace_follows():
            w.brace = True
            w.text += c
            self.i += 1
        else:
            w.text += c
            self.i += 1

    def brace_follows(self) -> bool:
        end = self.s.find("}", self.i)
        body = self.s[self.i + 1:end] if end > 0 else ""
        return end > 0 and ("," in body or ".." in body) and not any(ch in body for ch in _BLANKS + "\n;|&")

    def double_quoted(self, w: Word) -> None:
        s = self.s
        self.i += 1
        while True:
            if self.i >= len(s):
                raise _Unsure("a double quote is not closed")
            c = s[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] != "\n":
                    w.text += s[self.i + 1]
                self.i += 2
            elif c == "$":
                self.dollar(w, quoted=True)
            elif c == "`":
                self.backtick(w)
            else:
                w.text += c
                self.i += 1

    def dollar(self, w: Word, quoted: bool = False) -> None:
        s = self.s
        nxt = s[self.i + 1:self.i + 2]
        if nxt == "'" and not quoted:
            self.ansi_c(w)
        elif nxt == '"' and not quoted:
            self.i += 1
            self.double_quoted(w)
        elif s.startswith("$((", self.i):
            end = self.skip_balanced(self.i + 2)
            self.scan_expansions(s[self.i + 3:max(self.i + 3, end - 1)])
            w.text += s[self.i:end]
            w.dynamic = True
            self.i = end
        elif nxt == "(":
            begin = self.i
            self.i += 2
            self.i = self.nested_until_paren()
            w.text += s[begin:self.i]
            w.dynamic = True
        elif nxt == "{":
            end = self.skip_braces(self.i + 2)
            self.scan_expansions(s[self.i + 2:end - 1])
            w.text += s[self.i:end]
            w.dynamic = True
            self.i = end
        elif nxt and (nxt.isalnum() or nxt in "_@*#?$!-"):
            j = self.i + 1
            if nxt.isalpha() or nxt == "_":
                while j < len(s) and (s[j].isalnum() or s[j] == "_"):
                    j += 1
            else:
                j += 1
            w.text += s[self.i:j]
            w.dynamic = True
            self.i = j
        else:
            w.text += "$"
            self.i += 1

    def ansi_c(self, w: Word) -> None:
        s = self.s
        j = self.i + 2
        out: list[str] = []
        while True:
            if j >= len(s):
                raise _Unsure("a $'…' quote is not closed")
            c = s[j]
            if c == "'":
                break
            if c == "\\" and j + 1 < len(s):
                e = s[j + 1]
                if e in _ANSI_ESCAPES:
                    out.append(_ANSI_ESCAPES[e])
                    j += 2
                elif e == "x":
                    digits = _take(s, j + 2, "0123456789abcdefABCDEF", 2)
                    out.append(chr(int(digits, 16)) if digits else "\\x")
                    j += 2 + len(digits)
                elif e in "01234567":
                    digits = _take(s, j + 1, "01234567", 3)
                    out.append(chr(int(digits, 8)))
                    j += 1 + len(digits)
                elif e in "uU":
                    digits = _take(s, j + 2, "0123456789abcdefABCDEF", 4 if e == "u" else 8)
                    try:
                        out.append(chr(int(digits, 16)) if digits else "\\" + e)
                    except (ValueError, OverflowError):
                        raise _Unsure("a $'…' quote holds an invalid escape") from None
                    j += 2 + len(digits)
                else:
                    out.append("\\" + e)
                    j += 2
            else:
                out.append(c)
                j += 1
        w.text += "".join(out)
        self.i = j + 1

    def backtick(self, w: Word) -> None:
        s = self.s
        j = self.i + 1
        body: list[str] = []
        while True:
            if j >= len(s):
                raise _Unsure("a backtick is not closed")
            c = s[j]
            if c == "`":
                break
            if c == "\\" and j + 1 < len(s) and s[j + 1] in "`$\\":
                body.append(s[j + 1])
                j += 2
                continue
            body.append(c)
            j += 1
        self.nested("".join(body))
        w.text += s[self.i:j + 1]
        w.dynamic = True
        self.i = j + 1

    def skip_balanced(self, i: int) -> int:
        """Index after the ``)`` that closes the ``(`` just before ``i`` (quotes respected)."""
        return self._skip_pair(i, "(", ")", "a '(' is not closed")

    def skip_braces(self, i: int) -> int:
        """Index after the ``}`` that closes the ``${`` just before ``i``."""
        return self._skip_pair(i, "{", "}", "a '${' is not closed")

    def _skip_pair(self, i: int, opening: str, closing: str, unclosed: str) -> int:
        s = self.s
        depth = 1
        while i < len(s):
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if c == "'":
                end = s.find("'", i + 1)
                if end < 0:
                    break
                i = end + 1
                continue
            if c == opening:
                depth += 1
            elif c == closing:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        raise _Unsure(unclosed)


def _take(s: str, i: int, allowed: str, most: int) -> str:
    j = i
    while j < len(s) and j - i < most and s[j] in allowed:
        j += 1
    return s[i:j]
