"""``scripts/install-debs.sh`` (run by ``scripts/install.sh``) waits for another apt-get (issue 52, item 19).

Another ``apt-get`` running at the same moment left METEOR without WordNet, with only a warning: ``apt-get``
failed at once on the dpkg lock.  Here ``apt-get``, ``dpkg`` and ``id`` are fakes on ``PATH`` that record their
calls and hold a lock for the first calls.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("wordnet-base", "fonts-noto-cjk")

FAKE_APT_GET = r"""#!/usr/bin/env bash
# records its arguments; `update` fails on a lock the first $FAKE_LOCKED times; `install` works after an update,
# or never with FAKE_BROKEN
echo "$*" >> "$FAKE_DIR/calls"
case " $* " in
  *" update "*)
    n=$(cat "$FAKE_DIR/locked" 2>/dev/null || echo 0)
    if [ "$n" -lt "${FAKE_LOCKED:-0}" ]; then
      echo $((n + 1)) > "$FAKE_DIR/locked"
      echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
      exit 100
    fi
    touch "$FAKE_DIR/updated"; exit 0 ;;
  *" install "*)
    if [ -n "${FAKE_BROKEN:-}" ]; then echo "E: Sub-process /usr/bin/dpkg returned an error code (1)" >&2; exit 100; fi
    [ -e "$FAKE_DIR/updated" ] && exit 0
    echo "E: Unable to locate package ${*: -1}" >&2; exit 100 ;;
esac
"""


def _run(tmp_path: Path, uid: int = 0, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The script with the fakes; its result and the fake apt-get's calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("apt-get", FAKE_APT_GET), ("dpkg", "#!/bin/sh\nexit 1\n"), ("id", f"#!/bin/sh\necho {uid}\n")):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_DIR": str(tmp_path), "APT_RETRY_S": "0",
           **env}
    done = subprocess.run(["bash", "scripts/install-debs.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60)
    calls = tmp_path / "calls"
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_apt_get_waits_for_the_dpkg_lock_and_update_for_the_lists_lock(tmp_path):
    done, calls = _run(tmp_path, FAKE_LOCKED="2")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert all("-o DPkg::Lock::Timeout=600" in c for c in calls), calls
    # wordnet-base: not found before an update; the update tried again while the lists were locked
    assert [c.split(" -o DPkg::Lock::Timeout=600 ")[1] for c in calls] == [
        "install wordnet-base", "update", "update", "update", "install wordnet-base", "install fonts-noto-cjk"]


def test_a_package_that_cannot_be_installed_is_named_with_the_reason_at_the_end(tmp_path):
    done, _ = _run(tmp_path, FAKE_BROKEN="1")
    assert done.returncode == 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0] == ("warning: could not install wordnet-base (E: Sub-process /usr/bin/dpkg returned an error code "
                        "(1)): METEOR will run without synonyms; install it with: apt-get install wordnet-base")
    assert lines[1].startswith("warning: could not install fonts-noto-cjk (E: Sub-process")


def test_without_root_nothing_is_tried_and_each_package_is_named(tmp_path):
    done, calls = _run(tmp_path, uid=1000)
    assert done.returncode == 0 and calls == []
    assert [ln.split()[1] for ln in done.stderr.strip().splitlines()] == list(PACKAGES)
    assert "needs root and apt-get): METEOR will run without synonyms" in done.stderr
