"""ragstore from asyncio with an AsyncStore: index, then many searches at once on one pool.

Runs on $RAGSTORE_DSN when it is set, else on the embedded PostgreSQL under $RAGSTORE_HOME (started if
needed). It uses the offline backend (no model, no network) and drops its family at the end.

    python examples/async_store.py
"""

from __future__ import annotations

import asyncio
import os

from ragstore import AsyncStore, NotFound

FAMILY = "example_async"
TOOLS = {
    "cp": "cp copies files and directories",
    "mv": "mv moves or renames files",
    "tar": "tar stores files in an archive",
    "grep": "grep prints lines that match patterns",
}


async def main() -> None:
    dsn = os.environ.get("RAGSTORE_DSN")
    store = AsyncStore(dsn, pool_size=4) if dsn else await AsyncStore.embedded(pool_size=4)
    async with store:
        await store.migrate()
        try:
            await store.drop_family(FAMILY)  # a clean start if an earlier run was interrupted
        except NotFound:
            pass
        await store.create_family(FAMILY, "offline")
        records = [
            {"chunk_id": f"{name}#1", "package_path": f"tools/{name}", "text": text} for name, text in TOOLS.items()
        ]
        print((await store.index(records, FAMILY)).summary())

        queries = ["copy files", "rename files", "archive", "match patterns"] * 4
        answers = await asyncio.gather(*(store.search(FAMILY, q, k=1) for q in queries))
        for query, hits in list(zip(queries, answers, strict=True))[:4]:
            print(f"{query!r:18} -> {hits[0].chunk_id}")
        assert [hits[0].chunk_id for hits in answers[:4]] == ["cp#1", "mv#1", "tar#1", "grep#1"]
        print(f"{len(queries)} searches at once on a pool of {store.pool_size}")

        await store.drop_family(FAMILY)
        print("done")


if __name__ == "__main__":
    asyncio.run(main())
