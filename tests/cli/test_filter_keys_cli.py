"""`ragstore family filter-keys add|remove|list NAME` and what `family show` says of the declared keys."""

import json

from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.families import filter_keys


def test_add_list_show_and_remove_a_filter_key(dsn, conn):
    fam = families.create_family(conn, "docs", OfflineBackend())
    conn.commit()
    runner = CliRunner()
    added = runner.invoke(cli, ["--dsn", dsn, "family", "filter-keys", "add", "docs", "it's"])
    assert added.exit_code == 0, added.output
    assert added.output == 'family docs: filter keys "it\'s"\n'
    covered = runner.invoke(cli, ["--dsn", dsn, "family", "filter-keys", "add", "docs", "lang", "--covering"])
    assert covered.exit_code == 0 and covered.output == 'family docs: filter keys "it\'s", "lang" (covering)\n'
    listed = json.loads(runner.invoke(cli, ["--dsn", dsn, "family", "filter-keys", "list", "docs", "--json"]).output)
    assert [(k["key"], k["covering"], k["index"], k["valid"]) for k in listed] == [
        ("it's", False, filter_keys.index_name(fam.table, "it's"), True),
        ("lang", True, filter_keys.index_name(fam.table, "lang", True), True),
    ]
    shown = runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs"]).output
    assert 'filter keys: "it\'s", "lang" (covering)' in shown
    data = json.loads(runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs", "--json"]).output)
    assert data["filter_keys"] == ["it's", "lang"] and data["filter_keys_covering"] == ["lang"]
    removed = runner.invoke(cli, ["--dsn", dsn, "family", "filter-keys", "remove", "docs", "lang"])
    assert removed.exit_code == 0 and removed.output == 'family docs: filter keys "it\'s"\n'


def test_bad_keys_and_unknown_families_are_one_line_errors(dsn, conn):
    families.create_family(conn, "docs", OfflineBackend())
    conn.commit()
    runner = CliRunner()
    for args, words in (
        (["add", "docs", ""], "a filter key must be non-empty text"),
        (["add", "docs", "$eq"], "starts with $"),
        (["remove", "docs", "lang"], "no declared filter key 'lang'"),
        (["add", "nope", "lang"], "no family named 'nope'"),
        (["list", "Bad-Name"], "invalid family name"),
    ):
        result = runner.invoke(cli, ["--dsn", dsn, "family", "filter-keys", *args])
        assert result.exit_code != 0, args
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.output, result.output
