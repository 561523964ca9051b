"""The raw SDK floor: a bare ``AsyncOpenAI`` loop posting ready chat bodies, no pipeline.

Run as its own process by ``benchmarks/cli_process.py`` beside ``faithjudge score``, so both pay
interpreter start-up and imports: ``python -m benchmarks._bare_sdk_loop BASE_URL BODIES.jsonl
CONCURRENCY``. The client is what FaithJudge's ``openai`` backend sends through (the SDK on its
aiohttp transport, SDK retries off, each body posted as bytes), with ``CONCURRENCY`` calls in
flight from the first one.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


async def _run(base_url: str, bodies: list[bytes], concurrency: int) -> None:
    import openai

    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key="sk-bench",
        max_retries=0,
        http_client=openai.DefaultAioHttpClient(timeout=60.0),
    )
    pending = iter(bodies)

    async def worker() -> None:
        for body in pending:
            await client.post("/chat/completions", cast_to=bytes, content=body)

    async with client:
        await asyncio.gather(*(worker() for _ in range(concurrency)))


def main() -> None:
    base_url, path, concurrency = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    bodies = path.read_bytes().splitlines()
    asyncio.run(_run(base_url, bodies, concurrency))


if __name__ == "__main__":
    main()
