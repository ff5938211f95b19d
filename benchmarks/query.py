"""Query benchmark: HNSW and exact recall@10 and latency, search() against bare SQL, filtered plans.

    python benchmarks/query.py                               # 100k x 16 and 100k x 384
    python benchmarks/query.py --sizes 100k:16,100k:384,1m:16 --queries 200
    python benchmarks/query.py --sizes 20k:16 --queries 50   # a quick run
    python benchmarks/query.py --sizes 100k:384 --metadata-only   # metadata= against package= at 1%

Data: clustered vectors (100 Gaussian clusters), nested ``package_path`` values (:func:`package_of`) so
that one prefix keeps 0.1%, 1%, 2%, 5% or 10% of the rows, spread evenly through the table. Rows are written by
a direct binary COPY into ``ragstore.chunks`` and the family table (not ragstore's writer: this measures
the read path), the table is clustered by package_path and the HNSW index built after the load (ragstore's
``families.HNSW_M`` / ``HNSW_EF_CONSTRUCTION``), then VACUUM ANALYZE.
Each row also carries metadata ``{"tag": "t<j>"}`` (:func:`tag_of`): one tag keeps 1% of the rows, in
blocks of 100 consecutive rows every 10,000, so after the clustering by package a tag's rows are spread
over the whole table (metadata is not the clustering key). ``--metadata-only`` runs just the comparison of
a 1% ``metadata=`` filter with a 1% ``package=`` filter, interleaved query by query.
Queries are fresh points of the same clusters. Truth is numpy cosine over the whole matrix in memory.
Without ``--dsn`` an embedded server runs in a temporary folder (ragstore's settings) and is stopped at the end.
Every figure is from one run on one machine: compare the ratios, not the absolute milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
from _db import admin_dsn, scratch_database
from pgvector import HalfVector, Vector
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from ragstore import families, migrate
from ragstore.caches import Caches
from ragstore.common.like import like_prefix
from ragstore.db.connection import connect
from ragstore.errors import NotFound
from ragstore.families import filter_keys, tables
from ragstore.search import search
from ragstore.search import vector as vec
from ragstore.search.api import run_vector
from ragstore.search.request import DEFAULT_EF_SEARCH, Filter
from ragstore.search.vector import estimate_rows

K = 10
# Nested package paths: the prefix for each share keeps exactly that share of the rows.
FILTERS = {"0.1%": "a/b/c/d/0", "1%": "a/b/c/d/", "2%": "a/b/c/", "5%": "a/b/", "10%": "a/"}


def package_of(i: int) -> str:
    """Row ``i``'s package_path: i % 100 == 0 is 1% (0.1% when i % 1000 == 0), < 2 is 2%, < 5 5%, < 10 10%."""
    r = i % 100
    if r == 0:
        return f"a/b/c/d/{int(i % 1000 != 0)}"
    if r < 2:
        return "a/b/c/e"
    if r < 5:
        return f"a/b/f{r}"
    if r < 10:
        return f"a/g{r}"
    return f"h{r}"


def tag_of(i: int) -> str:
    """Row ``i``'s metadata tag: ``t0`` ... ``t99``, each on 1% of the rows (blocks of 100, every 10,000)."""
    return f"t{(i // 100) % 100}"


class BenchBackend:
    """A stand-in backend: the family records its name; queries are passed as vectors."""

    def __init__(self, dim: int) -> None:
        self.name, self.model, self.dim = "bench", f"clustered-{dim}", dim

    def embed(self, texts: Sequence[str]) -> Any:
        raise NotImplementedError


def make_data(n: int, dim: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(100, dim))
    data = centers[rng.integers(0, 100, n)] + 0.35 * rng.normal(size=(n, dim))
    qs = centers[rng.integers(0, 100, queries)] + 0.35 * rng.normal(size=(queries, dim))
    return data.astype(np.float32), qs.astype(np.float32)


def truth(data: np.ndarray, qs: np.ndarray, mask: np.ndarray | None = None) -> list[list[int]]:
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    idx = np.arange(len(data)) if mask is None else np.nonzero(mask)[0]
    sub = unit[idx]
    out = []
    for q in qs:
        scores = sub @ (q / np.linalg.norm(q))
        top = np.argpartition(-scores, K)[:K] if len(sub) > K else np.arange(len(sub))
        out.append([int(idx[i]) for i in top[np.argsort(-scores[top])]])
    return out


def load(
    dsn: str, data: np.ndarray, *, build_index: bool = True, meta_of: Callable[[int], dict[str, Any]] | None = None
) -> families.Family:
    """The bench family with ``data`` loaded (see the module docstring); without ``build_index`` its HNSW
    index is left for the caller to build; ``meta_of`` gives row i's metadata (default ``{"tag": tag_of(i)}``)."""
    meta_of = meta_of or (lambda i: {"tag": tag_of(i)})
    n, dim = data.shape
    with connect(dsn) as conn:
        fam = families.create_family(conn, "bench", BenchBackend(dim))  # type: ignore[arg-type]
        tables.drop_hnsw_index(conn, fam)
        started = time.perf_counter()
        zero = b"\0" * 32
        with conn.cursor() as cur:
            with cur.copy(
                "COPY ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256,"
                " metadata) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["text", "text", "text", "text", "bytea", "bytea", "jsonb"])
                for i in range(n):
                    meta = Jsonb(meta_of(i))
                    copy.write_row((fam.name, f"c{i:07d}", package_of(i), f"chunk {i}", zero, zero, meta))
            table = sql.Identifier(fam.table)
            with cur.copy(
                sql.SQL(
                    "COPY ragstore.{} (chunk_id, package_path, embedding, model, content_sha256, metadata) "
                    "FROM STDIN (FORMAT BINARY)"
                ).format(table)
            ) as copy:
                copy.set_types(["text", "text", fam.vector_type, "text", "bytea", "jsonb"])
                wrap = HalfVector if fam.vector_type == "halfvec" else Vector
                for i in range(n):
                    meta = Jsonb(meta_of(i))  # the copy ragstore's writer keeps beside the vector
                    copy.write_row((f"c{i:07d}", package_of(i), wrap(data[i]), fam.model, zero, meta))
        conn.commit()
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        tables.cluster_by_package(conn, fam)  # what ragstore's writer does after a bulk load
        clustered = time.perf_counter() - started
        started = time.perf_counter()
        if build_index:
            tables.ensure_hnsw_index(conn, fam)
        built = time.perf_counter() - started
        conn.autocommit = True
        conn.execute(sql.SQL("VACUUM ANALYZE ragstore.{}").format(table))
        conn.execute("VACUUM ANALYZE ragstore.chunks")
    print(
        f"  load {n:,} rows by binary COPY: {loaded:.1f} s; cluster by package {clustered:.1f} s;"
        + (f" HNSW build {built:.1f} s" if build_index else "")
    )
    return fam


def timed(fn: Callable[[np.ndarray], list[str]], qs: np.ndarray) -> tuple[list[list[str]], np.ndarray]:
    results, times = [], []
    for q in qs:
        started = time.perf_counter()
        results.append(fn(q))
        times.append((time.perf_counter() - started) * 1000)
    return results, np.array(times)


def interleaved(
    fns: Sequence[Callable[[np.ndarray], list[str]]], qs: np.ndarray
) -> list[tuple[list[list[str]], np.ndarray]]:
    """Each of ``fns`` on every query, query by query, the order rotated from one query to the next so
    that all see the same load on a shared machine; per function its answers and times (ms)."""
    for fn in fns:
        fn(qs[0])  # warm: prepared statements, the family cache, the estimate
    found: list[list[list[str]]] = [[] for _ in fns]
    times: list[list[float]] = [[] for _ in fns]
    for i, q in enumerate(qs):
        for slot in [(i + j) % len(fns) for j in range(len(fns))]:
            started = time.perf_counter()
            found[slot].append(fns[slot](q))
            times[slot].append((time.perf_counter() - started) * 1000)
    return [(f, np.array(t)) for f, t in zip(found, times, strict=True)]


def paired(
    first: Callable[[np.ndarray], list[str]], second: Callable[[np.ndarray], list[str]], qs: np.ndarray
) -> tuple[list[list[str]], np.ndarray, list[list[str]], np.ndarray]:
    (first_found, first_t), (second_found, second_t) = interleaved([first, second], qs)
    return first_found, first_t, second_found, second_t


def recall(found: list[list[str]], expected: list[list[int]]) -> float:
    return float(np.mean([len(set(f) & {f"c{i:07d}" for i in e}) / K for f, e in zip(found, expected, strict=True)]))


def row(label: str, found: list[list[str]], expected: list[list[int]], times: np.ndarray) -> float:
    p50, p95 = np.percentile(times, 50), np.percentile(times, 95)
    rec = recall(found, expected)
    print(f"  {label:<44} recall@10 {rec:6.3f}   p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
    return float(p50)


def metadata_against_package(dsn: str, data: np.ndarray, qs: np.ndarray, declare: str | None = None) -> None:
    """A 1% ``metadata=`` filter against a 1% ``package=`` filter through search(), interleaved; with
    ``declare``, the tag key declared (``filter_keys.add_key``) and three filters interleaved: package,
    metadata through the GIN index (search() given caches that remember the family without its declared
    key), metadata through the declared key's index (``declare``: "btree" or "covering"). The family table
    is vacuumed after the index is built, as autovacuum would: a covering index is read alone only where
    the visibility map says the pages are all-visible."""
    n = data.shape[0]
    pkg_mask = np.array([package_of(i).startswith(FILTERS["1%"]) for i in range(n)])
    tag_mask = np.array([tag_of(i) == "t0" for i in range(n)])
    pkg_truth, tag_truth = truth(data, qs, pkg_mask), truth(data, qs, tag_mask)
    with connect(dsn, autocommit=True) as conn:
        fam = families.get_family(conn, "bench")
        wanted = declare == "covering"
        if declare and ("tag" not in fam.filter_keys or ("tag" in fam.covering) != wanted):
            started = time.perf_counter()
            fam = filter_keys.add_key(conn, "bench", "tag", covering=wanted)
            conn.execute(sql.SQL("VACUUM ragstore.{}").format(sql.Identifier(fam.table)))
            print(
                f"  declared filter key 'tag' ({declare}, built concurrently, then ANALYZE and VACUUM):"
                f" {time.perf_counter() - started:.1f} s"
            )
        elif not declare and fam.filter_keys:
            fam = filter_keys.remove_key(conn, "bench", "tag")
        undeclared = Caches()
        undeclared.remember_family(replace(fam, options={}))

        def by_package(q: np.ndarray) -> list[str]:
            return [h.chunk_id for h in search(conn, "bench", vector=q, k=K, package=FILTERS["1%"])]

        def by_metadata(q: np.ndarray) -> list[str]:
            return [h.chunk_id for h in search(conn, "bench", vector=q, k=K, metadata={"tag": "t0"})]

        def by_metadata_gin(q: np.ndarray) -> list[str]:
            hits = search(conn, "bench", vector=q, k=K, metadata={"tag": "t0"}, caches=undeclared)
            return [h.chunk_id for h in hits]

        tag = Filter(None, {"tag": "t0"})
        labels = [
            (
                f"package='a/b/c/d/' ({int(pkg_mask.sum()):,} rows)",
                vec.plan_for(conn, fam, Filter(FILTERS["1%"])),
                pkg_truth,
            ),
            (f"metadata={{'tag': 't0'}} ({int(tag_mask.sum()):,} rows), GIN", vec.plan_for(conn, fam, tag), tag_truth),
        ]
        fns = [by_package, by_metadata_gin if declare else by_metadata]
        if declare:
            labels.append(
                (f"metadata, declared key ({declare})", vec.plan_for(conn, fam, tag.for_family(fam)), tag_truth)
            )
            fns.append(by_metadata)
        load_before = os.getloadavg()[0]
        results = interleaved(fns, qs)
        print(
            f"  -- 1% filters through search(), {len(qs)} queries interleaved; load average"
            f" {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
        )
        p50s = []
        for (label, plan, expected), (found, times) in zip(labels, results, strict=True):
            p50s.append(row(f"{label} -> {plan}", found, expected, times))
            print(f"      hits: fewest {min(len(f) for f in found)}, p95/p50 {np.percentile(times, 95) / p50s[-1]:.2f}")
        for (label, _, _), p50 in zip(labels[1:], p50s[1:], strict=True):
            print(f"  {label} / package p50 ratio: {p50 / p50s[0]:.2f}")


@contextlib.contextmanager
def kept_or_scratch(admin: str, keep: str | None, n: int, dim: int) -> Iterator[str]:
    """A scratch database (dropped at the end), or with ``keep`` the database of that name, created and
    migrated when missing and kept afterwards, so that the next run skips the load."""
    if keep is None:
        with scratch_database(admin) as dsn:
            yield dsn
        return
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (keep,)).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(keep)))
    dsn = make_conninfo(admin, dbname=keep)
    migrate.upgrade(dsn)
    yield dsn


def loaded(dsn: str, n: int, dim: int) -> families.Family | None:
    """The bench family when a kept database already holds it with ``n`` rows of ``dim`` dimensions."""
    with connect(dsn) as conn:
        try:
            fam = families.get_family(conn, "bench")
        except NotFound:
            return None
        rows = conn.execute(sql.SQL("SELECT count(*) FROM ragstore.{}").format(sql.Identifier(fam.table))).fetchone()
    if fam.dim != dim or rows is None or rows[0] != n:
        raise SystemExit(f"the kept database holds another bench family ({rows} rows, {fam.dim}-d): drop it first")
    print(f"  reusing the loaded family ({n:,} rows)")
    return fam


def bench(
    dsn: str,
    n: int,
    dim: int,
    queries: int,
    efs: list[int],
    exact_queries: int,
    filter_queries: int,
    seed: int,
    metadata_only: bool = False,
    declare_tag: str | None = None,
) -> None:
    print(f"\n== {n:,} rows x {dim}-d, {queries} queries ==")
    data, qs = make_data(n, dim, queries, seed)
    fam = loaded(dsn, n, dim) or load(dsn, data)
    metadata_against_package(dsn, data, qs[:filter_queries], declare_tag)
    if metadata_only:
        return
    full = truth(data, qs)
    with connect(dsn, autocommit=True) as conn:
        vtype = sql.SQL(f"{fam.vector_type}({dim})")
        bare = sql.SQL("SELECT chunk_id FROM ragstore.{} ORDER BY embedding <=> %s::{} LIMIT 10").format(
            sql.Identifier(fam.table), vtype
        )

        def bare_sql(q: np.ndarray) -> list[str]:
            return [r[0] for r in conn.execute(bare, (fam.query_param(q),))]

        for ef in efs:
            conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef)))
            found, times = timed(bare_sql, qs)
            row(f"bare SQL HNSW ef_search {ef}", found, full, times)
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(DEFAULT_EF_SEARCH)))
        # Interleaved, query by query, so that both see the same load on a shared machine.
        bare_found, bare_t, ours, ours_t = paired(
            bare_sql, lambda q: [h.chunk_id for h in search(conn, "bench", vector=q, k=K)], qs
        )
        b50 = row(f"bare SQL HNSW ef_search {DEFAULT_EF_SEARCH} (again)", bare_found, full, bare_t)
        s50 = row(f"search() default (ef_search {DEFAULT_EF_SEARCH})", ours, full, ours_t)
        print(f"  search() / bare SQL p50 ratio: {s50 / b50:.2f}")
        # A second baseline that, like search(), returns the text: the k rows joined to chunks.
        bare_text = sql.SQL(
            "SELECT e.chunk_id, e.d, c.text FROM (SELECT chunk_id, embedding <=> %s::{} AS d FROM ragstore.{} "
            "ORDER BY 2 LIMIT 10) AS e JOIN ragstore.chunks AS c ON c.family = 'bench' AND c.chunk_id = e.chunk_id "
            "ORDER BY 2"
        ).format(vtype, sql.Identifier(fam.table))

        def bare_text_sql(q: np.ndarray) -> list[str]:
            return [r[0] for r in conn.execute(bare_text, (fam.query_param(q),))]

        def ours_ids(q: np.ndarray) -> list[str]:
            return [h.chunk_id for h in search(conn, "bench", vector=q, k=K)]

        text_found, text_t, ours, ours_t = paired(bare_text_sql, ours_ids, qs)
        t50 = row("bare SQL joined to chunks for the text", text_found, full, text_t)
        s50 = row("search() default (again)", ours, full, ours_t)
        print(f"  search() / bare SQL with text p50 ratio: {s50 / t50:.2f}")
        few = qs[:exact_queries]
        found, times = timed(lambda q: [h.chunk_id for h in search(conn, "bench", vector=q, k=K, mode="exact")], few)
        row(f"exact numpy streamed ({len(few)} queries)", found, full[: len(few)], times)

        # The filtered baseline: the same query as a bare iterative-scan statement (session settings, the
        # default ef_search), returning what search() returns (text joined, re-sorted).
        bare_iterative = sql.SQL(
            "SELECT e.chunk_id, e.d, c.text FROM (SELECT chunk_id, embedding <=> %(q)s::{vt} AS d FROM ragstore.{t}"
            " WHERE package_path LIKE %(like)s ORDER BY embedding <=> %(q)s::{vt} LIMIT 10) AS e"
            " JOIN ragstore.chunks AS c ON c.family = 'bench' AND c.chunk_id = e.chunk_id ORDER BY 2, 1"
        ).format(vt=vtype, t=sql.Identifier(fam.table))
        for label, prefix in FILTERS.items():
            mask = np.array([package_of(i).startswith(prefix) for i in range(n)])
            expected = truth(data, qs, mask)
            flt = Filter(prefix)
            fq = qs[:filter_queries]
            print(f"  -- {label} package filter (prefix {prefix!r}, {int(mask.sum()):,} rows, {len(fq)} queries)")
            p50s: dict[str, float] = {}
            for name, plan, ef in (
                ("HNSW, iterative scan off", vec.PLAN_HNSW, None),
                ("HNSW iterative relaxed_order, ef 40", vec.PLAN_ITERATIVE, 40),
                ("HNSW iterative relaxed_order, ef 100", vec.PLAN_ITERATIVE, 100),
                ("HNSW iterative relaxed_order, ef 200", vec.PLAN_ITERATIVE, 200),
                ("HNSW iterative relaxed_order, ef 400", vec.PLAN_ITERATIVE, 400),
                ("exact over the subset (SQL)", vec.PLAN_EXACT_SUBSET, None),
            ):

                def forced(q: np.ndarray, plan: str = plan, ef: int | None = ef, flt: Filter = flt) -> list[str]:
                    return [h.chunk_id for h in run_vector(conn, fam, q, k=K, flt=flt, plan=plan, ef_search=ef)]

                found, times = timed(forced, fq)
                p50s[name] = row(name, found, expected[: len(fq)], times)
            started = time.perf_counter()
            estimate = estimate_rows(conn, fam, flt)
            estimate_ms = (time.perf_counter() - started) * 1000
            chosen = vec.plan_for(conn, fam, flt)
            conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(DEFAULT_EF_SEARCH)))
            conn.execute("SET hnsw.iterative_scan = relaxed_order")

            def bare_filtered(q: np.ndarray, like: str = like_prefix(prefix)) -> list[str]:
                return [r[0] for r in conn.execute(bare_iterative, {"q": fam.query_param(q), "like": like})]

            def auto(q: np.ndarray, p: str = prefix) -> list[str]:
                return [h.chunk_id for h in search(conn, "bench", vector=q, k=K, package=p)]

            bare_found, bare_t, ours, ours_t = paired(bare_filtered, auto, fq)
            conn.execute("SET hnsw.iterative_scan = off")
            b50 = row(f"bare SQL iterative, ef {DEFAULT_EF_SEARCH} (+ text)", bare_found, expected[: len(fq)], bare_t)
            s50 = row(f"search() auto -> {chosen}", ours, expected[: len(fq)], ours_t)
            print(
                f"  planner estimate {estimate.rows:,.0f} rows of {estimate.total:,.0f} (one EXPLAIN round trip"
                f" {estimate_ms:.2f} ms, then remembered for the connection)"
            )
            print(
                f"  search() / bare iterative p50: {s50 / b50:.2f};  search() / iterative ef"
                f" {DEFAULT_EF_SEARCH} (same path) p50: {s50 / p50s['HNSW iterative relaxed_order, ef 100']:.2f}"
            )
            ratio = p50s["exact over the subset (SQL)"] / p50s["HNSW iterative relaxed_order, ef 100"]
            print(f"  exact-subset / iterative(ef 100) p50: {ratio:.2f}  ({int(mask.sum()) * dim:,} rows x dim)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="an admin DSN where databases can be created (default: embedded server)")
    parser.add_argument("--sizes", default="100k:16,100k:384", help="rows:dim list, e.g. 100k:16,1m:16")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef", default="10,20,40,64,100,200", help="ef_search values of the recall curve")
    parser.add_argument("--exact-queries", type=int, default=20, help="queries to time on the numpy exact path")
    parser.add_argument("--filter-queries", type=int, default=100, help="queries per filtered plan")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metadata-only", action="store_true", help="only metadata= against package= at 1%%")
    parser.add_argument(
        "--keep-db",
        metavar="NAME",
        help="load into database NAME of the server and keep it; a later run with the same NAME reuses the"
        " loaded rows when it holds the same size (and, the data being seeded, must use the same --seed)",
    )
    parser.add_argument(
        "--declare-tag",
        choices=("btree", "covering"),
        help="with --metadata-only: also declare the tag key (ragstore family filter-keys add, --covering)"
        " and compare package=, metadata= through the GIN index and through the declared key",
    )
    args = parser.parse_args()
    efs = [int(x) for x in args.ef.split(",")]
    with admin_dsn(args.dsn) as admin:
        for spec in args.sizes.split(","):
            rows_text, dim_text = spec.lower().split(":")
            n = int(float(rows_text.replace("k", "e3").replace("m", "e6")))
            with kept_or_scratch(admin, args.keep_db, n, int(dim_text)) as dsn:
                bench(
                    dsn,
                    n,
                    int(dim_text),
                    args.queries,
                    efs,
                    args.exact_queries,
                    args.filter_queries,
                    args.seed,
                    args.metadata_only,
                    args.declare_tag,
                )


if __name__ == "__main__":
    main()
