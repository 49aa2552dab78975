"""Awaitables run concurrently on either of anyio's backends (asyncio or trio), for the
tests marked ``@pytest.mark.anyio``: ``asyncio.gather`` has no trio counterpart."""
import anyio


async def gather(awaitables) -> list:
    """The results of ``awaitables``, run in one task group, in the order given."""
    awaitables = list(awaitables)
    results = [None] * len(awaitables)

    async def one(i, awaitable):
        results[i] = await awaitable

    async with anyio.create_task_group() as group:
        for i, awaitable in enumerate(awaitables):
            group.start_soon(one, i, awaitable)
    return results
