"""KFTT (Japanese-English) in tests: the shared copy, skipped loudly when absent, and tiny mirrors of it."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA

KFTT = SHARED_DATA / "kftt"
FILES = tuple(f"{split}.{lang}.gz" for split in ("train", "dev", "test") for lang in ("ja", "en"))


def require_kftt() -> Path:
    """The shared KFTT folder; skips the test, naming the place looked at, when it is not there."""
    if not all((KFTT / name).is_file() for name in FILES):
        pytest.skip(f"KFTT not found at {KFTT} (needs ../shared/data/kftt beside the repo with {', '.join(FILES)})")
    return KFTT


def head_lines(name: str, n: int) -> list[str]:
    """The first ``n`` lines of the shared KFTT file ``name`` (``train.ja.gz``)."""
    with gzip.open(require_kftt() / name, "rt", encoding="utf-8") as fh:
        return [line.rstrip("\n") for _, line in zip(range(n), fh)]


def tiny_mirror(dst: Path, n: int = 300) -> Path:
    """A KFTT mirror in ``dst`` holding the first ``n`` lines of each of its files."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        with gzip.open(dst / name, "wt", encoding="utf-8") as fh:
            fh.writelines(f"{line}\n" for line in head_lines(name, n))
    return dst
