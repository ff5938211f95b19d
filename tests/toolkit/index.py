"""Helpers several test modules share (once in integration/test_index.py)."""

from ragstore.embed.offline import OfflineBackend


def records(n: int, package: str = "pkg/a", prefix: str = "c") -> list[dict]:
    return [{"chunk_id": f"{prefix}{i}", "package_path": package, "text": f"text number {i}"} for i in range(n)]


class InterruptedOnThirdCall(OfflineBackend):
    """The offline backend, interrupted (Ctrl-C) on its third call."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        if self.calls == 3:
            raise KeyboardInterrupt
        return super().embed(texts)
