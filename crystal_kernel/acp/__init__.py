"""Crystal as an Agent Client Protocol agent (``crystal acp``).

ACP clients (Jupyter AI's chat, Zed, other editors) start ``crystal acp`` and talk
JSON-RPC over its stdin/stdout. :mod:`crystal_kernel.acp.agent` maps ACP sessions,
prompts, permission requests, modes and cancellation onto the host; :mod:`.mapping`
turns host events and transcripts into ACP updates. See docs/acp.md.
"""
