"""scanmt.shape_caches: oneDNN's per-shape caches bounded before a process's first bf16 product (issue 52, item 10)."""

import os
import subprocess
import sys
import textwrap

import pytest

from scanmt.shape_caches import CACHE_ENV, CAPACITY, bound_shape_caches
from tests.conftest import one_train_step, tiny_config


@pytest.fixture
def unset_caches(monkeypatch):
    """Neither variable set; whatever a test sets is removed afterwards."""
    for name in CACHE_ENV:
        monkeypatch.setenv(name, "")  # recorded as absent, so restored as absent
        monkeypatch.delenv(name)


def test_bound_sets_both_caches_unless_the_user_did(unset_caches, monkeypatch):
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "8")
    assert bound_shape_caches() == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(CAPACITY), "LRU_CACHE_CAPACITY": "8"}
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(CAPACITY)


def test_training_and_the_precision_probe_bound_the_caches(unset_caches, small_data_dir, tmp_path):
    from scanmt.training.precision import bf16_speedup

    one_train_step(tiny_config(small_data_dir, train__precision="bf16"), tmp_path / "run")
    assert {name: os.environ.get(name) for name in CACHE_ENV} == dict.fromkeys(CACHE_ENV, str(CAPACITY))
    for name in CACHE_ENV:
        del os.environ[name]
    bf16_speedup(shape=(4, 8, 8, 8), repeats=1)
    assert {name: os.environ.get(name) for name in CACHE_ENV} == dict.fromkeys(CACHE_ENV, str(CAPACITY))


#: a fresh process: bf16 products of 600 shapes, then the memory they left held (after malloc_trim), in MB
CHILD = textwrap.dedent("""
    import ctypes, torch
    from scanmt.shape_caches import bound_shape_caches
    bound_shape_caches()
    torch.set_num_threads(1)
    trim = ctypes.CDLL(None).malloc_trim
    def rss():
        return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
    w, x = torch.randn(256, 1024).bfloat16(), torch.randn(600, 256).bfloat16()
    x @ w
    trim(0)
    before = rss()
    for m in range(1, 601):
        x[:m] @ w
    trim(0)
    print(rss() - before)
""")


def _held_mb(env: dict[str, str]) -> float:
    base = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    out = subprocess.run([sys.executable, "-c", CHILD], env={**base, **env, "OMP_NUM_THREADS": "1"},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return float(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm and calls glibc's malloc_trim")
def test_bounded_caches_hold_a_bounded_memory():
    """600 product shapes: with the libraries' 1,024 entries each shape's kernel stays (about 0.5 MB each on
    this project's Xeon); bounded, 64 of them do."""
    unbounded = _held_mb(dict.fromkeys(CACHE_ENV, "1024"))
    if unbounded < 60:
        pytest.skip(f"bf16 products of 600 shapes held {unbounded:.0f} MB with oneDNN's default caches: this CPU "
                    "does not run them through oneDNN, so there is nothing to bound")
    bounded = _held_mb({})
    assert bounded < unbounded / 3, (bounded, unbounded)
