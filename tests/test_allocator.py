"""scanmt.allocator: glibc's mmap and trim thresholds raised in the process and passed on to its children,
unless the user set them, asked not to, or the C library is not glibc. Each case runs in a fresh
interpreter, so that this test process keeps its own malloc settings."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

from scanmt.allocator import ENV, OPT_OUT

PROBE = """
import json, os
from scanmt.allocator import tune_malloc
tuned = tune_malloc()
print(json.dumps({"tuned": tuned, "env": {k: os.environ.get(k) for k in %r}}))
""" % (sorted(ENV),)

#: scanmt.allocator tunes glibc's malloc only: elsewhere every case expects the process left alone
GLIBC = platform.libc_ver()[0] == "glibc"
TUNED_ENV = {k: str(v) for k, v in ENV.items()} if GLIBC else {k: None for k in ENV}


def _probe(**env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ENV and k not in ("GLIBC_TUNABLES", OPT_OUT)}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def test_tunes_the_process_and_its_children():
    r = _probe()
    assert r["tuned"] is GLIBC
    assert r["env"] == TUNED_ENV
    if GLIBC:  # a child started with them (a grid worker) counts as tuned and keeps them
        assert _probe(**{k: str(v) for k, v in ENV.items()})["tuned"] is True


def test_leaves_the_users_settings_alone():
    r = _probe(MALLOC_MMAP_THRESHOLD_="131072")
    assert r["tuned"] is False and r["env"] == {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": None}
    r = _probe(GLIBC_TUNABLES="glibc.malloc.trim_threshold=0")
    assert r["tuned"] is False and r["env"] == {k: None for k in ENV}
    r = _probe(**{OPT_OUT: "0"})
    assert r["tuned"] is False and r["env"] == {k: None for k in ENV}


def test_the_scanmt_command_tunes_itself(tmp_path):
    """`scanmt COMMAND` (here one that fails on a missing file) runs tuned, and so do the processes it starts."""
    missing = tmp_path / "missing.txt"
    code = ("import os; from scanmt.cli.main import main; "
            f"status = main(['evaluate', '--hyp', {str(missing)!r}, '--ref', {str(missing)!r}]); "
            "print(status, os.environ.get('MALLOC_MMAP_THRESHOLD_'))")
    env = {k: v for k, v in os.environ.items() if k not in ENV and k not in ("GLIBC_TUNABLES", OPT_OUT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", str(TUNED_ENV["MALLOC_MMAP_THRESHOLD_"])], (out.stdout, out.stderr)
