"""A griffe extension for the library reference: the docstrings cite code with Sphinx roles
(``:class:`~ragstore.Store```, ``:func:`ragstore.search```); Markdown has no roles, so each becomes
inline code, the ``~`` form keeping only the last name, as Sphinx shows it."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj):`(~?)([^`]+)`")


def _plain(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_plain, obj.docstring.value)
