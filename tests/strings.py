"""Varied test strings: ASCII, accents, emoji, CJK, RTL, zero-width, long text (no NUL: Postgres refuses it)."""

from __future__ import annotations

import random

_ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,;:!?-_()[]{}'\"\t\n",
    "àáâãäåçèéêëìíîïñòóôõöùúûüýÿ ÀÉÎÕÜ ßøæœ",
    "中文字符测试日本語のテキスト한국어텍스트",
    "😀🎉🚀👍🏽🧪🐘❤️‍🔥",
    "مرحبا بالعالم שלום עולם",
    "\u200b\u200c\u200d\u2060\ufeff\u202e",
    "Ωμέγα Привет мир ქართული हिन्दी",
    "\U0001d400\U0001f600\U00010348\U000e0001",
]


def varied_strings(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = ["a", " ", "hello", "Hello", "hello ", "é", "😀", "中", "a" * 5000]
    while len(out) < count:
        alphabet = "".join(rng.sample(_ALPHABETS, k=rng.randint(1, 3)))
        length = rng.choice([1, 2, 5, 20, 80, 300, 1200, 3000])
        out.append("".join(rng.choice(alphabet) for _ in range(length)))
    return out
