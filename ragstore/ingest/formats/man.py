"""Manual pages (roff with the ``man`` or ``mdoc`` macros), read without running ``man`` or ``groff``.

Sections at ``.SH``/``.Sh`` (and ``.SS``/``.Ss`` below them); the title is ``name(section)`` from ``.TH``
or ``.Dt``. Font changes, comments and the common escapes are removed; ``.B``/``.I`` and their
alternating forms keep their words; ``.nf``...``.fi`` keep their lines; other requests and macro
definitions are dropped. A page that only includes another (``.so man1/other.1``) has no text of its own.
Bytes are UTF-8, else Latin-1 (older pages). A file with NUL bytes is not a manual page.
"""

from __future__ import annotations

import re

from ragstore.ingest.document import Document, NotThisKind, Section
from ragstore.ingest.formats.text import TITLE_CHARS

_NAMED = {
    "em": "—", "en": "–", "hy": "-", "aq": "'", "dq": '"', "lq": "“", "rq": "”", "oq": "‘", "cq": "’",
    "bu": "•", "co": "©", "rg": "®", "tm": "™", "mi": "−", "pl": "+", "mu": "×", "<=": "≤", ">=": "≥",
    "->": "→", "<-": "←", "ti": "~", "ha": "^", "rs": "\\", "ga": "`", "sl": "/", "ba": "|", "de": "°",
}  # fmt: skip
_ESCAPE = re.compile(
    r"""\\(?:
        f(?:\[[^\]]*\]|\(..|.)          # font
      | s[+-]?(?:\[[^\]]*\]|\(..|\d+)   # size
      | \*(?:\[([^\]]*)\]|\((..)|(.))   # string
      | \((..)                          # named character, two letters
      | \[([^\]]*)\]                    # named character, any length
      | [kmnFgYV](?:\[[^\]]*\]|\(..|.)  # registers, colours: nothing to read
      | [hvwlLoDNbxXRSZ]'[^']*'         # motions and the like
      | ([-e.\\ 0|^&c%:!~'`",/])         # one character
    )""",
    re.VERBOSE,
)
_ONE = {"-": "-", "e": "\\", ".": ".", "\\": "\\", " ": " ", "0": " ", "~": " ", "'": "'", "`": "`"}
_STRINGS = {"R": "®", "Tm": "™", "lq": "“", "rq": "”"}
_BREAKS = {
    "PP",
    "LP",
    "P",
    "sp",
    "TP",
    "IP",
    "HP",
    "TQ",
    "Pp",
    "Lp",
    "Bl",
    "El",
    "Bd",
    "Ed",
    "It",
    "RS",
    "RE",
    "EX",
    "EE",
}
_ARG = re.compile(r'"(?:[^"]|"")*"?|\S+')
_ALTERNATING = {"BR", "RB", "IR", "RI", "BI", "IB"}
_MAN_WORDS = {"B", "I", "SM", "SB", "UR", "MT", "OP"}
_WORDS = {"Nm", "Fl", "Ar", "Cm", "Pa", "Xr", "Em", "Sy", "Li", "Dv",
          "Ev", "Va", "Fn", "Fa", "Ft", "Ic", "Op", "Oo", "Oc", "Ql", "Dq", "Sq", "Pq", "Nd", "An", "Ad", "Er",
          "Lk", "Mt", "Ms", "St", "Tn", "Bx", "At", "Ox", "Nx", "Fx", "Dl", "Ns", "No", "Aq", "Bq", "Brq"}  # fmt: skip


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        string = match.group(1) or match.group(2) or match.group(3)
        if string is not None:
            return _STRINGS.get(string, "")
        named = match.group(4) or match.group(5)
        if named is not None:
            if named.startswith("u") and len(named) > 1:
                try:
                    return chr(int(named[1:].split("_")[0], 16))
                except ValueError:
                    return ""
            return _NAMED.get(named, "")
        single = match.group(6)
        if single is not None:
            return _ONE.get(single, "")
        return ""

    return _ESCAPE.sub(one, text)


def _arguments(rest: str) -> list[str]:
    """A request's arguments: words split on spaces; a double-quoted one may hold spaces (``""`` is ``"``)."""
    words = []
    for word in _ARG.findall(rest):
        if word.startswith('"'):
            word = word[1:-1] if word.endswith('"') and len(word) > 1 else word[1:]
            word = word.replace('""', '"')
        words.append(word)
    return words


def _mdoc(words: list[str], name: str) -> str:
    """The words of an mdoc line: callable macros dropped, ``Fl x`` is ``-x``, a bare ``Nm`` the name."""
    out: list[str] = []
    flag = False
    for i, word in enumerate(words):
        if word in _WORDS:
            if word == "Fl":
                flag = True
                if i + 1 == len(words) or words[i + 1] in _WORDS:
                    out.append("-")
                    flag = False
            elif word == "Nm" and (i + 1 == len(words) or words[i + 1] in _WORDS):
                out.append(name)
            continue
        out.append(f"-{word}" if flag else word)
        flag = False
    return _unescape(" ".join(out))


def read(data: bytes, path: str) -> Document:
    if b"\x00" in data[:8192] or b"\x00" in data:
        raise NotThisKind("not a manual page (NUL bytes): no reader for it")
    try:
        source = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        source = data.decode("latin-1")
    sections: list[Section] = []
    path_: list[str] = []
    paragraphs: list[str] = []
    lines: list[str] = []
    title = ""
    name = ""  # mdoc: the first .Nm, which a bare .Nm repeats
    fill = True
    skipping = ""  # the name that ends a macro definition or an ignore block ("." for "..")

    def end_paragraph() -> None:
        text = ("\n" if not fill else " ").join(lines).strip()
        if not fill:
            text = "\n".join(lines).strip("\n")
        elif text:
            text = re.sub(r"[ \t]+", " ", text)
        if text.strip():
            paragraphs.append(text)
        lines.clear()

    def end_section() -> None:
        end_paragraph()
        if paragraphs:
            sections.append(Section.of([_tidy(p) for p in paragraphs], tuple(path_)))
        paragraphs.clear()

    def heading(level: int, words: list[str]) -> None:
        end_section()
        name = _unescape(" ".join(words)).strip()
        del path_[level:]
        while len(path_) < level:
            path_.append("")
        path_.append(name)
        paragraphs.append(name)

    for raw in source.replace("\r\n", "\n").split("\n"):
        if skipping:
            # The end is a request named as the definition's end: ``..``, also written ``.  .`` (in an
            # ``.am`` indented inside an ``.if`` block, as Asciidoctor writes its pages' preambles).
            if raw[:1] in (".", "'") and raw[1:].split(None, 1)[:1] == [skipping]:
                skipping = ""
            continue
        if raw.startswith(('.\\"', "'\\\"", '\\"')) or raw.strip() in (".", "'"):
            continue
        if raw[:1] in (".", "'") and len(raw) > 1:
            parts = raw[1:].strip().split(None, 1)
            if not parts:
                continue
            macro, rest = parts[0], (parts[1] if len(parts) > 1 else "")
            words = _arguments(rest)
            if macro in ("de", "de1", "am", "am1", "ig"):
                ends = words[1:] if macro != "ig" else words
                skipping = ends[0] if ends else "."
            elif macro == "so":
                continue
            elif macro in ("TH", "Dt") and words:
                title = f"{_unescape(words[0])}({words[1]})" if len(words) > 1 else _unescape(words[0])
            elif macro in ("SH", "Sh"):
                heading(0, words)
            elif macro in ("SS", "Ss"):
                heading(1, words)
            elif macro in ("nf", "EX", "Bd"):
                end_paragraph()
                fill = False
            elif macro in ("fi", "EE", "Ed"):
                end_paragraph()
                fill = True
            elif macro == "br":
                if fill:
                    lines.append("\n")
            elif macro in _BREAKS:
                end_paragraph()
                if macro in ("IP", "It") and words and macro == "IP":
                    lines.append(_unescape(words[0]))
                elif macro == "It" and words:
                    lines.append(_unescape(" ".join(words)))
            elif macro in _ALTERNATING:
                lines.append(_unescape("".join(words)))
            elif macro in _MAN_WORDS:
                lines.append(_unescape(" ".join(words)))
            elif macro in _WORDS:
                if macro == "Nm" and words and not name:
                    name = words[0]
                lines.append(_mdoc([macro, *words], name))
            continue
        lines.append(_unescape(raw))
    end_section()
    return Document(tuple(s for s in sections if s.text.strip()), title[:TITLE_CHARS])


def _tidy(text: str) -> str:
    # a ".br" inside filled text was kept as a newline piece: "a \n b" -> "a\nb"
    return re.sub(r" ?\n ?", "\n", text)
