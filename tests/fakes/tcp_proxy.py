"""A TCP proxy on loopback that a test can stop and start: a database outage on demand.

``stop()`` closes the listening socket and cuts every open connection (the client sees its
connections reset and new ones refused); ``start()`` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread.start()

    def _run(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        self._writers.difference_update((writer, up_writer))

    async def _start(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            transport = writer.transport
            with contextlib.suppress(Exception):
                transport.abort()
        self._writers.clear()

    def start(self) -> None:
        self._run(self._start())

    def stop(self) -> None:
        self._run(self._stop())

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@contextlib.contextmanager
def tcp_proxy(host: str, port: int) -> Iterator[TcpProxy]:
    proxy = TcpProxy(host, port)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.close()
