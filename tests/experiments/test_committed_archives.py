"""The archives committed under ``archive/`` (finished grids that outlived their machines) are whole: every
tarball holds what a pack writes, with the metrics the manifest records, and every attention file packed for a
figure window holds the attention of exactly the sentences its meta lists, as restore will check."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from scanmt.errors import DataError
from scanmt.experiments.archive import check_archive, figure_systems, read_manifest
from scanmt.experiments.archive.corpus import check_left_out, source_roots
from scanmt.experiments.archive.trimming import _undrawn
from scanmt.experiments.archive.unpack import check_tarball

REPO = Path(__file__).resolve().parents[2]
ARCHIVES = sorted(p.parent for p in (REPO / "archive").glob("*/manifest.json"))


def test_the_repository_has_archives():
    assert ARCHIVES, f"no archive/*/manifest.json below {REPO}: archive/kftt is committed"


@pytest.mark.parametrize("dest", ARCHIVES, ids=[p.name for p in ARCHIVES])
def test_a_committed_archive_is_whole(dest):
    """The whole archive as restore checks it, where the prepared data its shared work mirrors is here (else
    its run tarballs alone: ``check_archive`` refuses the missing data in one line)."""
    manifest = read_manifest(dest)
    data = (manifest["shared"] or {}).get("data")
    keys = sorted(manifest["runs"])
    if data is None or Path(data["dir"]).is_dir():
        assert check_archive(dest, manifest) == keys
    else:
        with pytest.raises(DataError, match=rf"{data['dir']}: the prepared data that the archive's shared work "
                                            "mirrors is missing"):
            check_archive(dest, manifest)
        for key in keys:
            check_left_out(key, manifest["runs"][key]["left_out"], source_roots(manifest["out"], data), "m")
            assert check_tarball(dest / "runs" / f"{key}.tar.gz", {}, "metrics.json") == manifest["runs"][key]["metrics"]
    window = manifest.get("figure_window")
    for key in keys:
        for name, how in manifest["runs"][key]["left_out"].items():
            sources = how.get("attention_sources")
            if sources is None:
                continue
            with tarfile.open(dest / "runs" / f"{key}.tar.gz") as tar:
                data = tar.extractfile(name).read()
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                held = sorted(int(k[len("attn_"):]) for k in z.files if k.startswith("attn_"))
                assert not [k for k in z.files if k.startswith("src_")], f"{key}: source tokens travelled"
            assert meta["n"] == sources["sentences"]
            if "rows" in sources:
                assert held == meta["rows"] and len(held) == sources["rows"], key
                assert sources["window"] == window, f"{key}: packed for another window than the manifest's"
            else:
                assert held == list(range(meta["n"])), key


@pytest.mark.parametrize("dest", ARCHIVES, ids=[p.name for p in ARCHIVES])
def test_a_committed_archive_holds_no_attention_that_no_report_draws(dest):
    """Seed 1's attention of the grids' figure pairs only (``experiment trim`` leaves out the rest of an archive
    packed before the packer did): a dense attention file is a megabyte or more that no report reads."""
    figure = figure_systems(dest)
    undrawn = {key: names for key in sorted(read_manifest(dest)["runs"])
               if (names := _undrawn(dest / "runs" / f"{key}.tar.gz", key, figure))}
    assert undrawn == {}, f"run `scanmt experiment trim {dest}`"
