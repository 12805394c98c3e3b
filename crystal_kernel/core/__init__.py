"""The shared vocabulary of every layer: messages, events, errors, the interaction
protocol, the tool-call types, config, access and credential rules, atomic writes, and
every ``.crystal/`` location (:mod:`crystal_kernel.core.paths`).

A leaf: nothing here imports another part of crystal_kernel (an import-linter contract in
pyproject.toml guards it; docs/architecture.md draws the layers).
"""
