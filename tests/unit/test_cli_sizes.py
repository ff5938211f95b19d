"""``human_size``: the one way the command line prints a byte count (vacuum, family show, filter keys)."""

from ragstore.cli import admin, family
from ragstore.cli.main import human_size


def test_byte_counts_read_in_binary_steps_up_to_gigabytes():
    assert [human_size(n) for n in (0, 512, 1536, 20 * 2**20, 3 * 2**30, 5 * 2**40)] == [
        "0 B",
        "512 B",
        "1.5 kB",
        "20.0 MB",
        "3.0 GB",
        "5120.0 GB",
    ]


def test_the_commands_share_it():
    assert admin.human_size is family.human_size is human_size
