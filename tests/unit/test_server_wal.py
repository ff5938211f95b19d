"""The embedded server's WAL is sized for a desktop: its folder stays near max_wal_size, not gigabytes."""

from ragstore.db.server import EmbeddedServer


def test_the_embedded_servers_wal_is_bounded_for_a_desktop(tmp_path):
    settings, _ = EmbeddedServer(tmp_path)._settings_texts()
    values = dict(
        (key.strip(), value.strip().strip("'"))
        for key, value in (line.split("=", 1) for line in settings.splitlines() if "=" in line and line[0] != "#")
    )
    assert values["max_wal_size"] == "1GB" and values["min_wal_size"] == "80MB"
    assert values["wal_compression"] == "off"
