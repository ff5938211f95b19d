"""The exceptions ragstore raises.

Every error the library raises on purpose is a :class:`RagstoreError`; the CLI catches that one
class in one place and prints its message on one line. Subclasses say what the caller does next::

    RagstoreError
    ├── InvalidInput          bad input: fix the file, line, field or option it names
    │   └── ModelMismatch     a vector or query from another embedding space than the family's
    ├── NotFound              an unknown family, record or file
    ├── Conflict              the thing exists already, or the store is in a state that refuses the call
    ├── PermissionDenied      the database role may not do this (see the roles in the README)
    ├── BackendError          an embedding backend failed (HTTP provider, model files)
    ├── DatabaseUnavailable   Postgres cannot be reached or went away
    │   └── Timeout           a statement ran past its statement_timeout
    └── SchemaError           the database is not migrated to the version this code needs

psycopg errors are mapped to these at one boundary (:func:`ragstore.db.connection.map_db_error`).
"""

from __future__ import annotations


class RagstoreError(Exception):
    """Root of every error ragstore raises on purpose."""


class InvalidInput(RagstoreError, ValueError):
    """Bad input; the message names the file, line and field, or the option."""


class ModelMismatch(InvalidInput):
    """A vector or a query from another embedding space (backend, model or dimension) than the family's."""


class NotFound(RagstoreError, LookupError):
    """An unknown family, record or file."""


class Conflict(RagstoreError):
    """The object exists already, or the store's state refuses the operation."""


class PermissionDenied(RagstoreError, PermissionError):
    """The connected role lacks a privilege (e.g. ragstore_reader writing, ragstore_app altering the schema)."""


class BackendError(RagstoreError):
    """An embedding backend failed."""


class DatabaseUnavailable(RagstoreError):
    """Postgres cannot be reached, refused the connection, or went away mid-query."""


class Timeout(DatabaseUnavailable):
    """A statement was cancelled by statement_timeout."""


class SchemaError(RagstoreError):
    """The database schema is missing or older than this code needs: run `ragstore migrate`."""
