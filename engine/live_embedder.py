"""The embedder a long-running process holds: it follows the database's vector space, so a
re-embedding run's switch (engine/reembed.py) reaches every server and worker within
`FOLLOW_INTERVAL`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

from engine.db import Connection, Pool
from engine.embedding import Embedder, FloatMatrix, load_embedder
from engine.reembed import FOLLOW_INTERVAL, stored_space

log = logging.getLogger("engram.reembed")


class LiveEmbedder:
    """An `Embedder` that follows the database's vector space: after a re-embedding run
    switches the database, `follow` loads the model it names and every holder of this
    object embeds with it from then on. `on_swap` callbacks drop what the old model made
    (the recall engine's cached token vectors)."""

    def __init__(self, embedder: Embedder, model_dir: Path | None = None) -> None:
        self._current = embedder
        self._model_dir = model_dir
        self._on_swap: list[Callable[[], None]] = []

    @property
    def current(self) -> Embedder:
        return self._current

    @property
    def name(self) -> str:
        return self._current.name

    @property
    def dimension(self) -> int:
        return self._current.dimension

    @property
    def space(self) -> str:
        return self._current.space

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return self._current.embed(texts)

    def embed_tokens(self, texts: Sequence[str]) -> list[FloatMatrix]:
        return self._current.embed_tokens(texts)

    def embed_with_tokens(self, texts: Sequence[str]) -> tuple[FloatMatrix, list[FloatMatrix]]:
        return self._current.embed_with_tokens(texts)

    def known_tokens(self, text: str) -> list[bool]:
        return self._current.known_tokens(text)

    def on_swap(self, callback: Callable[[], None]) -> None:
        self._on_swap.append(callback)

    async def follow(self, conn: Connection) -> bool:
        """Load the database's model if it is not the one in use; True when it swapped."""
        space, model = await stored_space(conn)
        if space is None or space == self._current.space:
            return False
        if model is None:
            log.warning("the database's vectors are in %s, not %s", space, self._current.space)
            return False
        loop = asyncio.get_running_loop()
        loaded = await loop.run_in_executor(None, load_embedder, model, self._model_dir)
        if loaded.space != space:
            log.warning("model %r makes %s, not the database's %s", model, loaded.space, space)
            return False
        self._current = loaded
        for callback in self._on_swap:
            callback()
        log.info("now embedding with %s (%s): the database was re-embedded", model, space)
        return True

    async def watch(self, pool: Pool, interval: timedelta = FOLLOW_INTERVAL) -> None:
        """Check every `interval`, until cancelled; a failed check is logged and retried."""
        while True:
            await asyncio.sleep(interval.total_seconds())
            try:
                async with pool.acquire() as conn:
                    await self.follow(conn)
            except Exception:  # a database restart must not end the watch
                log.exception("could not check the database's vector space")
