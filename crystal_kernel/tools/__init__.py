"""Built-in tools: one module per tool, with its model-facing description in a `.md`
file of the same name beside it."""
