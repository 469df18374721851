"""Shared fixtures for the metric tests: the shared data directory (../shared/data beside the repo)."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).parents[2] / ".." / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA.resolve()} (expected ../shared/data beside the repo)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def rwth(shared_data: Path) -> Path:
    d = shared_data / "alignments" / "deen-rwth"
    if not (d / "test.talp").is_file():
        pytest.skip(f"RWTH gold alignments not found in {d}")
    return d
