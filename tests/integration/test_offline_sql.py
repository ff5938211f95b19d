import numpy as np
import pytest

from ragstore.embed.offline import fingerprint
from tests.strings import varied_strings


@pytest.mark.slow
def test_sql_offline_embed_is_bit_identical_to_python(conn):
    texts = varied_strings(1000, seed=11)
    expected = fingerprint(texts)
    rows = conn.execute(
        "SELECT t.ord, ragstore.offline_embed(t.s)::real[] FROM unnest(%s::text[]) WITH ORDINALITY AS t(s, ord)",
        (texts,),
    ).fetchall()
    assert len(rows) == 1000
    for ord_, values in rows:
        got = np.array(values, dtype=np.float32)
        assert got.view(np.uint32).tolist() == expected[ord_ - 1].view(np.uint32).tolist(), repr(texts[ord_ - 1][:30])


def test_sql_offline_embed_refuses_empty_text(conn):
    import psycopg

    with pytest.raises(psycopg.errors.InvalidParameterValue, match="empty"):
        conn.execute("SELECT ragstore.offline_embed('')")
