"""Small helpers of the experiment tooling: JSON files written atomically and read leniently, the
source checkout's git commit."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from scanmt.io import atomic_open


def repo_root() -> Path:
    import scanmt

    return Path(scanmt.__file__).resolve().parents[2]


def git_commit(root: Path | None = None) -> str:
    """``git rev-parse`` of the source checkout (``+dirty`` when src/ has uncommitted changes), or ``unknown``."""
    root = root or repo_root()
    if not (root / ".git").exists():
        return "unknown (not a git checkout)"
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=20, env=env, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src"], capture_output=True,
                                text=True, timeout=20, env=env, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (git failed)"
    return head + ("+dirty" if status else "")


def write_json(path: Path, obj: Any) -> None:
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False)
        fh.write("\n")


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None
