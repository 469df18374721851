import os
import subprocess
import sys

import pytest

from tests.conftest import tiny_config


@pytest.mark.slow
def test_two_cpu_processes_stay_identical(small_data_dir, tmp_path):
    cfg = tiny_config(small_data_dir, train__max_steps=4, train__valid_every=0)
    cfg.data.valid_limit = 10
    cfg_path = tmp_path / "cfg.yaml"
    cfg.save_yaml(cfg_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517",
        "-m", "scanmt", "train", "--config", str(cfg_path), "--out", str(tmp_path / "run"),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "distributed:      2 processes, replicas in sync" in res.stdout, res.stdout
    assert (tmp_path / "run" / "best.pt").exists()
