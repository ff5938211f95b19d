"""`ragstore context-pack --retrieve` and `--memory-profile` against the real database (no stand-ins)."""

import json

from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources


def test_retrieve_fills_l3_with_hits_reasons_and_citations(conn, dsn, tmp_path):
    families.create_family(conn, "docs", OfflineBackend())
    src = tmp_path / "c.jsonl"
    texts = ["rotate the signing keys every month", "keys are stored in the vault", "the cafeteria menu"]
    src.write_text(
        "".join(
            json.dumps({"chunk_id": f"c{i}", "package_path": "ops/keys.md", "text": t}) + "\n"
            for i, t in enumerate(texts)
        )
    )
    index_sources(conn, "docs", open_sources([str(src)]))
    args = ["--dsn", dsn, "context-pack", "--brief", "Answer the question", "--budget", "4000"]
    plain = CliRunner().invoke(cli, args, catch_exceptions=False)
    retrieved = CliRunner().invoke(
        cli,
        [*args, "--retrieve", "rotate keys", "--family", "docs", "-k", "2", "--mode", "fts"],
        catch_exceptions=False,
    )
    assert plain.exit_code == 0 and retrieved.exit_code == 0
    pack = json.loads(retrieved.output)
    snippets = pack["layers"]["L3"] if "L3" in pack["layers"] else pack["layers"]["snippets"]
    assert len(snippets) == 2 and snippets[0]["ref"] == "[ops/keys.md#c0]"
    assert snippets[0]["reason"].startswith('retrieved for "rotate keys": rank 1, score ')
    assert "fts" in snippets[0]["reason"] and snippets[0]["text"] == texts[0]
    assert json.loads(plain.output)["pack_id"] != pack["pack_id"]


def test_memory_profile_puts_the_composed_memory_in_l4_and_l5(dsn, tmp_path):
    profile = tmp_path / "ana.json"
    profile.write_text(json.dumps({"agent": "ana", "stores": ["semantic"]}))
    runner = CliRunner()
    added = runner.invoke(
        cli,
        ["--dsn", dsn, "memory", "add", "--agent", "ana", "--store", "semantic",
         "--content", "Deploys need two approvals", "--confidence", "0.9", "--id", "m1",
         "--at", "2026-01-01T00:00:00Z"],
        catch_exceptions=False,
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    result = runner.invoke(
        cli, ["--dsn", dsn, "context-pack", "--brief", "Deploy", "--budget", "4000", "--memory-profile", str(profile)],
        catch_exceptions=False,
    )  # fmt: skip
    pack = json.loads(result.output)
    dumped = json.dumps(pack["layers"])
    assert "[m1] Deploys need two approvals" in dumped and '"m1"' in dumped
