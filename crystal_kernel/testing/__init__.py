"""Test doubles shipped with the package: an in-process scripted provider and a loopback
HTTP server speaking the real OpenAI and Anthropic streaming protocols."""

from crystal_kernel.testing.scripted import (
    HANG,
    Delay,
    Fail,
    ScriptedProvider,
    text_reply,
    tool_reply,
)

__all__ = ["HANG", "Delay", "Fail", "ScriptedProvider", "text_reply", "tool_reply"]
