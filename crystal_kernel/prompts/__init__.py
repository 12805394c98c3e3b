"""The prompt system (SPEC §6–§9): built-in named prompts, ``{{name}}`` placeholders,
prompt sets, prompt attachments, process flags, and composition of the final texts.

Entry points: :func:`crystal_kernel.prompts.compose.compose_system`,
:func:`crystal_kernel.prompts.compose.compose_named`,
:func:`crystal_kernel.prompts.selection.resolve_selection`.
"""
