"""ragstore from Python with a Store: create a family, index records, search, filter, read back, delete.

Runs on $RAGSTORE_DSN when it is set, else on the embedded PostgreSQL under $RAGSTORE_HOME (started if
needed). It uses the offline backend (no model, no network) and drops its family at the end.

    python examples/store.py
"""

from __future__ import annotations

import os

from ragstore import NotFound, Store

FAMILY = "example_store"
RECORDS = [
    {
        "chunk_id": "cp#1",
        "package_path": "coreutils/cp",
        "text": "cp copies files and directories",
        "metadata": {"lang": "en"},
    },
    {
        "chunk_id": "mv#1",
        "package_path": "coreutils/mv",
        "text": "mv moves or renames files",
        "metadata": {"lang": "en"},
    },
    {
        "chunk_id": "rm#1",
        "package_path": "coreutils/rm",
        "text": "rm supprime des fichiers",
        "metadata": {"lang": "fr"},
    },
    {
        "chunk_id": "ls#1",
        "package_path": "coreutils/ls",
        "text": "ls lists directory contents",
        "metadata": {"lang": "en"},
    },
]


def main() -> None:
    store = Store() if os.environ.get("RAGSTORE_DSN") else Store.embedded()
    with store:
        store.migrate()
        try:
            store.drop_family(FAMILY)  # a clean start if an earlier run was interrupted
        except NotFound:
            pass
        store.create_family(FAMILY, "offline")
        print(store.index(RECORDS, FAMILY).summary())
        print(store.index(RECORDS, FAMILY).summary())  # the same records again: nothing is written

        # An offline family searches full text by default (its fingerprints carry no meaning).
        for hit in store.search(FAMILY, "copy files", k=2):
            print(f"{hit.chunk_id:6} {hit.score:.3f}  {hit.text}")
        french = store.search(FAMILY, "fichiers", metadata={"lang": "fr"})
        assert [h.chunk_id for h in french] == ["rm#1"], french

        found = store.get(FAMILY, ["cp#1", "nope#1"])
        print("get:", [c.chunk_id for c in found.chunks], "missing:", found.missing)
        page = store.list_chunks(FAMILY, package="coreutils/", limit=10)
        print("list:", [c.chunk_id for c in page.chunks], f"{page.total} in all")
        deleted = store.delete(FAMILY, ids=["ls#1"])
        print(deleted.summary())
        assert store.list_chunks(FAMILY).total == 3

        store.drop_family(FAMILY)
        print("done")


if __name__ == "__main__":
    main()
