"""A real terminal for tests of interactive fronts: a tmux pane on its own server.

``tmux`` is a real terminal emulator: the program under test gets a pseudo-terminal,
answers prompt_toolkit's cursor queries, and ``screen()`` returns what a person would
see. Keys are typed one at a time with a delay, as a person types.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping

KEY_DELAY = 0.03


class TmuxTerminal:
    """One detached tmux session running ``command`` (a shell line) in a 120x40 pane."""

    def __init__(self, command: str, env: Mapping[str, str], *, width: int = 120, height: int = 40) -> None:
        if shutil.which("tmux") is None:
            raise RuntimeError("tmux is not installed; these tests need a real terminal emulator")
        self.socket = f"crystal-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.env = dict(env)
        self._tmux("new-session", "-d", "-x", str(width), "-y", str(height), command)

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], env=self.env, capture_output=True, text=True,
                             timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"tmux {args[0]} failed: {out.stderr.strip()}")
        return out.stdout

    def type(self, text: str, delay: float = KEY_DELAY) -> None:
        """Type ``text`` key by key (literally), ``delay`` seconds apart."""
        for char in text:
            self._tmux("send-keys", "-l", char)
            time.sleep(delay)

    def key(self, *names: str) -> None:
        """Press named keys (tmux names: Enter, Escape, C-c, C-d)."""
        for name in names:
            self._tmux("send-keys", name)
            time.sleep(KEY_DELAY)

    def deny(self, reason: str = "") -> None:
        """At an approval prompt: choose Deny (3), then give ``reason`` (or none)."""
        self.type("3")
        self.key("Enter")
        self.wait_for("reason for the model")
        if reason:
            self.type(reason)
        self.key("Enter")

    def screen(self) -> str:
        """The visible pane plus its scrollback, as text."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-2000")

    def wait_for(self, text: str, timeout: float = 60.0, *, after: int = 0) -> str:
        """Wait until ``text`` appears on the screen (beyond its first ``after`` occurrences)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if screen.count(text) > after:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not appear within {timeout}s; the screen:\n{screen}")
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], env=self.env, capture_output=True, timeout=30)
