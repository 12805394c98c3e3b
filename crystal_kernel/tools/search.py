"""The search tool: ranked full-text search for "which files matter"."""

from __future__ import annotations

import asyncio

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools._notebook_search import matching_cells, read_sources
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output

DEFAULT_LIMIT = 10
MAX_LIMIT = 50


class SearchInput(ToolInput):
    query: str = Field(description="Words: names, concepts, error text.")
    limit: int | None = Field(default=None, ge=1, le=MAX_LIMIT,
                              description=f"Files to return (default {DEFAULT_LIMIT}).")


class SearchTool(Tool[SearchInput]):
    name = "search"
    Input = SearchInput
    risk = Risk.READ

    async def run(self, args: SearchInput, ctx: ToolContext) -> ToolResult:
        if not any(ch.isalnum() for ch in args.query):
            raise ToolError("The query has no words to search for.")
        # Here, not at the top: the index (sqlite3, inotify through ctypes) loads with the
        # first search, not on every `crystal run` start.
        from crystal_kernel.tools._index import generation, index_for, split_words

        index = index_for(ctx.workspace)
        gen = generation(ctx.workspace)
        await asyncio.to_thread(index.refresh, generation=gen)
        hits = await asyncio.to_thread(index.query, args.query, args.limit or DEFAULT_LIMIT)
        if not hits:
            return ToolResult(ok=True, text=f"No files match '{args.query}'. Try other words, or grep for an exact string.")
        blocks = []
        words = split_words(args.query)
        for n, hit in enumerate(hits, start=1):
            snippet = hit.snippet[:400]
            where = ""
            if hit.path.lower().endswith(".ipynb"):
                sources = await asyncio.to_thread(read_sources, ctx.workspace / hit.path)
                cells = matching_cells(sources or [], words)
                where = f" (cells {', '.join(map(str, cells[:20]))})" if cells else ""
            blocks.append(f"{n}. {hit.path}{where}" + (f"\n   {snippet}" if snippet else ""))
        return ToolResult(ok=True, text=truncate_output("\n".join(blocks), ctx.config.tool_output_limit))
