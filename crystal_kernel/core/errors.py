"""Exceptions, one meaning each.

- :class:`UserError`: the person gave bad input (a flag, a config file, an id). Fronts
  show the one-line message; the CLI exits 2. Nothing was changed.
  :class:`UnknownSession` is the one for an id that names no saved session.
- :class:`ToolError`: a tool call failed in a way the *model* should read and act on.
  The loop turns it into a failed tool result; it is never a crash.
- :class:`ProviderError`: the model service failed (auth, connection, unknown model,
  retries exhausted). One clear line for the person.
- :class:`NotSupported`: a provider adapter cannot map something (MODE-6).
Any other exception is a bug.
"""

from __future__ import annotations


class CrystalError(Exception):
    """Base of every deliberate Crystal exception."""


class UserError(CrystalError):
    """Bad input from the person; the message is one English line."""


class UnknownSession(UserError):
    """The id names no saved session in the workspace (ACP answers -32002, resource not
    found)."""


class ToolError(CrystalError):
    """A tool call failed; the message goes back to the model as a failed result."""


class ProviderError(CrystalError):
    """The model service failed; the message is one English line for the person."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class NotSupported(CrystalError):
    """A provider cannot represent a request (text-input tools, text tool calls)."""
