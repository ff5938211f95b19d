"""The part every client of one JSON endpoint shares: its URL, its repr, closing it.

Kept apart from :mod:`ragstore.common.http` so that defining a client does not load httpx: a plain
search never makes one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ragstore.common.closing import Closing

# The longest timeout an HTTP request may be given (seconds); here, where the CLI can read it without httpx.
MAX_TIMEOUT = 3600.0

if TYPE_CHECKING:
    from ragstore.common.http import JsonEndpoint

__all__ = ["EndpointClient"]


class EndpointClient(Closing):
    """A client that talks to one :class:`~ragstore.common.http.JsonEndpoint`, ``self._http``.

    ``url`` is the endpoint without any password; ``repr`` names the class, the URL, the attributes
    listed in ``_shown`` and the endpoint (whose own repr hides the key); ``close`` closes its connections
    (``with client:`` too).
    """

    _http: JsonEndpoint
    _shown: ClassVar[tuple[str, ...]] = ()

    @property
    def url(self) -> str:
        """The endpoint, without any password."""
        return self._http.url

    def __repr__(self) -> str:
        shown = "".join(f", {name}={getattr(self, name)!r}" for name in self._shown)
        return f"{type(self).__name__}(url={self.url!r}{shown}, http={self._http!r})"

    def close(self) -> None:
        self._http.close()
