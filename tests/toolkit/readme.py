"""Helpers several test modules share (once in cli/test_readme.py)."""


def sql_statements(text: str) -> list[str]:
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]
