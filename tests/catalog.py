"""The catalog of schema ragstore as comparable rows: what two databases must share to be the same schema.

:func:`catalog` reads, for schema ragstore: tables (kind, row-level security, options, owner, ACL, comment),
columns (position, type, default, nullability, generation, identity, collation, comment), constraints,
indexes, sequences, functions (signature, result, language, body, volatility, security, parallel safety,
settings, owner, ACL, comment), triggers, views, policies; and around it the schema's owner and ACL, the
database's ACL, the default privileges, the extensions and the memberships of the ragstore roles. Names
only, never OIDs, so databases built apart compare equal when their schemas are.
"""

from __future__ import annotations

from typing import Any

import psycopg

QUERIES: dict[str, str] = {
    "schema": """
        SELECT n.nspname, pg_get_userbyid(n.nspowner), n.nspacl::text[]
        FROM pg_namespace n WHERE n.nspname = 'ragstore'
    """,
    "database acl": """
        SELECT array(SELECT a::text FROM unnest(d.datacl) AS a ORDER BY 1)
        FROM pg_database d WHERE d.datname = current_database()
    """,
    "extensions": """
        SELECT e.extname, n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace ORDER BY 1
    """,
    "relations": """
        SELECT c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity, c.reloptions::text[],
               pg_get_userbyid(c.relowner), array(SELECT a::text FROM unnest(c.relacl) AS a ORDER BY 1),
               obj_description(c.oid, 'pg_class'), c.relpersistence
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' ORDER BY 1
    """,
    "columns": """
        SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attgenerated, a.attidentity, co.collname,
               col_description(c.oid, a.attnum)
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
        WHERE n.nspname = 'ragstore' AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm')
        ORDER BY 1, 2
    """,
    "constraints": """
        SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid), k.condeferrable, k.convalidated
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' ORDER BY 1, 2
    """,
    "indexes": """
        SELECT i.tablename, i.indexname, i.indexdef FROM pg_indexes i WHERE i.schemaname = 'ragstore' ORDER BY 1, 2
    """,
    "sequences": """
        SELECT c.relname, format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmax, s.seqmin,
               s.seqcache, s.seqcycle
        FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' ORDER BY 1
    """,
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_arguments(p.oid),
               pg_get_function_result(p.oid), l.lanname, p.prosrc, p.provolatile, p.prosecdef, p.proparallel,
               p.proisstrict, p.proconfig, p.prokind, pg_get_userbyid(p.proowner),
               array(SELECT a::text FROM unnest(p.proacl) AS a ORDER BY 1), obj_description(p.oid, 'pg_proc')
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
        WHERE n.nspname = 'ragstore' ORDER BY 1, 2
    """,
    "triggers": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' AND NOT t.tgisinternal ORDER BY 1, 2
    """,
    "views": """
        SELECT v.viewname, v.definition FROM pg_views v WHERE v.schemaname = 'ragstore' ORDER BY 1
    """,
    "policies": """
        SELECT p.tablename, p.policyname, p.permissive, p.roles::text[], p.cmd, p.qual, p.with_check
        FROM pg_policies p WHERE p.schemaname = 'ragstore' ORDER BY 1, 2
    """,
    "default privileges": """
        SELECT CASE WHEN pg_get_userbyid(d.defaclrole) = current_user THEN '(migrating role)'
                    ELSE pg_get_userbyid(d.defaclrole) END,
               d.defaclobjtype, array(SELECT a::text FROM unnest(d.defaclacl) AS a ORDER BY 1)
        FROM pg_default_acl d LEFT JOIN pg_namespace n ON n.oid = d.defaclnamespace
        WHERE n.nspname = 'ragstore' ORDER BY 1, 2
    """,
    "role memberships": """
        SELECT r.rolname, m.rolname, a.admin_option
        FROM pg_auth_members a JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
        WHERE r.rolname LIKE 'ragstore\\_%' ORDER BY 1, 2
    """,
    "roles": """
        SELECT rolname, rolcanlogin, rolsuper, rolinherit, rolcreaterole FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader') ORDER BY 1
    """,
}


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list | tuple) else value


def catalog(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every part of :data:`QUERIES`, read from the database of ``dsn`` (arrays as tuples)."""
    with psycopg.connect(dsn) as conn:
        return {part: [_hashable(row) for row in conn.execute(text).fetchall()] for part, text in QUERIES.items()}


def differences(left: dict[str, list[tuple[Any, ...]]], right: dict[str, list[tuple[Any, ...]]]) -> list[str]:
    """One line per row present on one side only, by part: empty when the catalogs are the same."""
    lines = []
    for part in QUERIES:
        a, b = set(left[part]), set(right[part])
        lines += [f"{part}: only left:  {row}" for row in sorted(a - b, key=repr)]
        lines += [f"{part}: only right: {row}" for row in sorted(b - a, key=repr)]
        if not lines and left[part] != right[part]:
            lines.append(f"{part}: same rows in another order")
    return lines
