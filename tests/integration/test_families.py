import pytest
from psycopg import sql

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import Conflict, InvalidInput, ModelMismatch, NotFound


class FakeDim:
    """A backend of another space; only its identity is used (nothing is embedded)."""

    name, model = "other", "m"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed(self, texts):  # pragma: no cover - never called
        raise AssertionError


def test_create_makes_table_with_vector_column_and_hnsw_index(conn):
    family = families.create_family(conn, "docs", OfflineBackend())
    col = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'ragstore.emb_docs'::regclass AND attname = 'embedding'"
    ).fetchone()
    assert col == ("vector(16)",)
    stats = families.family_stats(conn, "docs")
    assert stats.rows == 0 and stats.hnsw_index == "ragstore.emb_docs_embedding_hnsw"
    opclass = conn.execute(
        "SELECT opc.opcname FROM pg_index i JOIN pg_opclass opc ON opc.oid = i.indclass[0] "
        "WHERE i.indexrelid = 'ragstore.emb_docs_embedding_hnsw'::regclass"
    ).fetchone()
    assert opclass == ("vector_cosine_ops",)
    assert family.dim == 16 and families.get_family(conn, "docs") == family


@pytest.mark.parametrize(
    "name", ["Docs", "1docs", "", "a" * 49, "docs; DROP TABLE ragstore.chunks", 'x"y', "docs-1", "dócs"]
)
def test_invalid_names_are_refused_before_sql(conn, name):
    with pytest.raises(InvalidInput, match="invalid family name"):
        families.create_family(conn, name, OfflineBackend())
    assert conn.execute("SELECT count(*) FROM ragstore.families").fetchone() == (0,)


def test_longest_valid_name_works(conn):
    name = "a" + "b" * 47
    families.create_family(conn, name, OfflineBackend())
    assert [f.name for f in families.list_families(conn)] == [name]


def test_duplicate_family_is_a_conflict(conn):
    families.create_family(conn, "docs", OfflineBackend())
    with pytest.raises(Conflict):
        families.create_family(conn, "docs", OfflineBackend())


def test_unknown_family_is_not_found(conn):
    with pytest.raises(NotFound, match="nope"):
        families.get_family(conn, "nope")


def test_large_dimensions_use_halfvec_and_limits_are_checked_up_front(conn):
    family = families.create_family(conn, "big", FakeDim(3072))
    assert family.vector_type == "halfvec"
    col = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'ragstore.emb_big'::regclass AND attname = 'embedding'"
    ).fetchone()
    assert col == ("halfvec(3072)",)
    with pytest.raises(InvalidInput, match="4,000"):
        families.create_family(conn, "huge", FakeDim(4001))


def test_backend_mismatch_names_the_migration(conn):
    family = families.create_family(conn, "docs", OfflineBackend())
    with pytest.raises(ModelMismatch, match="ragstore family migrate docs"):
        family.check_backend(FakeDim(16))


def test_drop_removes_table_but_keeps_chunks(conn):
    families.create_family(conn, "docs", OfflineBackend())
    families.drop_family(conn, "docs")
    assert conn.execute("SELECT to_regclass('ragstore.emb_docs')").fetchone() == (None,)
    with pytest.raises(NotFound):
        families.get_family(conn, "docs")
    conn.execute(sql.SQL("SELECT count(*) FROM ragstore.chunks"))
