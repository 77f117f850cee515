"""The HTTP server ``serve`` runs the application in: uvicorn's, waking once a second.

uvicorn's main loop wakes every 0.1 s to refresh the ``Date`` header (once a second) and to
notice a stop asked for. Beside an idle dashboard, that tick was most of the process's CPU
(0.15 % of a core of its 0.20 %). Here the loop wakes once a second: the header is refreshed as
often, and a stop (SIGINT, SIGTERM) is noticed within a second.
"""

from __future__ import annotations

import asyncio
from typing import Final

import uvicorn

#: How often the server's loop wakes (uvicorn's own: 0.1 s).
TICK_S: Final = 1.0
#: uvicorn counts its ticks in tenths of a second: the date is refreshed when the count is a
#: multiple of 10, so each of these ticks counts 10.
_TENTHS: Final = 10
_WRAP: Final = 864000


class Server(uvicorn.Server):
    """uvicorn's server, its main loop waking every ``TICK_S``."""

    async def main_loop(self) -> None:
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + _TENTHS) % _WRAP
            await asyncio.sleep(TICK_S)
            should_exit = await self.on_tick(counter)
