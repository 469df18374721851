"""The layout of an experiment folder: every folder and file name a grid writes, in one place.

::

    OUT/
      .lock                       held by the grid process (``experiment run``) while it runs
      grids/NAME.yaml, NAME.json  each grid as run, and its record (what ``report`` and ``status`` read)
      shared/                     work done once per folder (:class:`SharedPaths`; :mod:`scanmt.experiments.shared`)
      runs/SYSTEM/seedK/          one run (system x seed):
        spec.json                 the run's spec (:class:`scanmt.experiments.spec.RunSpec`)
        command.txt, log.txt      its exact commands; everything its worker printed
        .lock                     held by its worker
        config.yaml, last.pt, best.pt, metrics.csv     its training (``scanmt train``)
        penalties.yaml            its tuned penalties
        {split}.hyp.{tgt}, {split}.hyp.tok.{tgt}, {split}.attn.npz, {split}.search.json    its translations
        eval.json, eval.{split}.json                   its scores (main split, each extra split)
        stress/stress.json        its stress test
        metrics.json              its summary (:mod:`scanmt.experiments.run_metrics`)
        .stages/STAGE.done        one marker per finished step
        DONE                      written last
        previous-decode-N/        what ``run --redecode`` moved aside

An archive of the folder (:mod:`scanmt.experiments.archive`) holds ``manifest.json``, ``shared.tar.gz``,
``predictor-fertility.npy``, ``grids/*`` and ``runs/SYSTEM/seedK.tar.gz``.

Nothing here reads or writes a file: these are names and paths only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scanmt.io import LOCK_FILE

# --------------------------------------------------------------------------- OUT

GRIDS = "grids"
SHARED = "shared"
RUNS = "runs"
#: what ``experiment run`` writes into OUT (a folder holding one of them is an experiment folder)
EXPERIMENT_ENTRIES = (GRIDS, RUNS, SHARED, LOCK_FILE)


def grids_dir(out: Path) -> Path:
    """``OUT/grids``: the grid files as run and their records."""
    return out / GRIDS


def grid_record_path(out: Path, name: str) -> Path:
    """``OUT/grids/NAME.json``: the record of grid ``name``."""
    return grids_dir(out) / f"{name}.json"


def grid_file_path(out: Path, name: str) -> Path:
    """``OUT/grids/NAME.yaml``: grid ``name``'s file as run."""
    return grids_dir(out) / f"{name}.yaml"


def grid_record_paths(out: Path) -> list[Path]:
    """The grid records of ``out`` (``OUT/grids/*.json``), sorted."""
    d = grids_dir(out)
    return sorted(d.glob("*.json")) if d.is_dir() else []


def runs_dir(out: Path) -> Path:
    """``OUT/runs``: the run folders, ``SYSTEM/seedK``."""
    return out / RUNS


def system_dir(out: Path, system: str) -> Path:
    """``OUT/runs/SYSTEM``: the runs of one system."""
    return runs_dir(out) / system


def seed_name(seed: int) -> str:
    """``seedK``: the folder of seed ``seed``."""
    return f"seed{seed}"


def seed_of(folder: Path) -> int | None:
    """The seed of a ``seedK`` folder (None: not such a folder name)."""
    digits = folder.name[4:]
    return int(digits) if folder.name.startswith("seed") and digits.isdigit() else None


def seed_dirs(system_folder: Path) -> list[Path]:
    """The ``seed*`` entries of a system's folder, by seed (names without a number first)."""
    if not system_folder.is_dir():
        return []
    return sorted(system_folder.glob("seed*"), key=lambda p: int(p.name[4:]) if p.name[4:].isdigit() else 0)


def run_dir(out: Path, system: str, seed: int) -> Path:
    """``OUT/runs/SYSTEM/seedK``."""
    return system_dir(out, system) / seed_name(seed)


def run_dirs(runs: Path) -> list[Path]:
    """Every ``SYSTEM/seed*`` entry of an ``OUT/runs`` folder, sorted."""
    return sorted(runs.glob("*/seed*"))


def run_key(run: Path) -> str:
    """``SYSTEM/seedK`` of a run folder."""
    return f"{run.parent.name}/{run.name}"


# --------------------------------------------------------------------------- a run's files

SPEC = "spec.json"
COMMAND = "command.txt"
LOG = "log.txt"
LAST_CHECKPOINT = "last.pt"
BEST_CHECKPOINT = "best.pt"
TRAIN_LOG = "metrics.csv"
PENALTIES = "penalties.yaml"
EVAL = "eval.json"
METRICS = "metrics.json"
DONE = "DONE"
STAGES_DIR = ".stages"
STRESS_DIR = "stress"
STRESS_JSON = "stress.json"
#: the files of a run that its decode steps (tune, translate, evaluate) write, and metrics.json
DECODE_OUTPUTS = ("*.hyp.*", "*.attn.npz", "*.search.json", "eval*.json", PENALTIES, METRICS)


def stage_marker(run: Path, stage: str) -> Path:
    """``RUN/.stages/STAGE.done``: written when the step ``stage`` finished."""
    return run / STAGES_DIR / f"{stage}.done"


def stage_markers(run: Path) -> list[Path]:
    """The step markers of a run, sorted by name."""
    return sorted((run / STAGES_DIR).glob("*.done"))


def marker_stage(marker: Path) -> str:
    """The stage a step marker is for."""
    return marker.name.removesuffix(".done")


def checkpoint_of(run: str | Path) -> Path:
    """``RUN/best.pt``: the model a run decodes."""
    return Path(run) / BEST_CHECKPOINT


def hyp_name(split: str, tgt: str) -> str:
    """``{split}.hyp.{tgt}``: a split's translation."""
    return f"{split}.hyp.{tgt}"


def hyp_tok_name(split: str, tgt: str) -> str:
    """``{split}.hyp.tok.{tgt}``: a split's tokenized translation."""
    return f"{split}.hyp.tok.{tgt}"


def attention_name(split: str) -> str:
    """``{split}.attn.npz``: a split's attention."""
    return f"{split}{ATTENTION_SUFFIX}"


def search_json_name(split: str) -> str:
    """``{split}.search.json``: the search statistics of a split's translate step."""
    return f"{split}.search.json"


def eval_json_name(split: str, main_split: str) -> str:
    """``eval.json`` for the main split, ``eval.{split}.json`` for an extra one."""
    return EVAL if split == main_split else f"eval.{split}.json"


def previous_decode_dir(run: Path, k: int) -> Path:
    """``RUN/previous-decode-K``: the K-th earlier decode ``--redecode`` moved aside."""
    return run / f"previous-decode-{k}"


def moved_marker_name(marker: Path) -> str:
    """The name a step marker gets in a ``previous-decode-K`` folder."""
    return f"stage-{marker.name}"


# --------------------------------------------------------------------------- shared work


@dataclass(frozen=True)
class SharedPaths:
    """``OUT/shared``: the prepared data (``data``), its alignments, the fertility predictor, step markers."""

    out: Path

    @property
    def root(self) -> Path:
        return self.out / SHARED

    @property
    def data(self) -> Path:
        return shared_data(self.root)

    @property
    def align(self) -> Path:
        return self.data / "align"

    @property
    def word_aligner(self) -> Path:
        return self.align / "word"

    @property
    def predictor_dir(self) -> Path:
        return self.root / "predictor"

    @property
    def predictor(self) -> Path:
        return self.predictor_dir / BEST_CHECKPOINT

    @property
    def predictor_last(self) -> Path:
        """The predictor's ``last.pt``, which a resumed training continues from."""
        return self.predictor_dir / LAST_CHECKPOINT

    @property
    def mirror_origin(self) -> Path:
        """``shared/data/.mirror-of``: the prepared folder that ``data`` mirrors (``--data PATH``)."""
        return self.data / MIRROR_ORIGIN

    def marker(self, step: str) -> Path:
        return shared_marker(self.root, step)


def shared_data(shared: Path) -> Path:
    """``OUT/shared/data`` of the shared folder ``shared``: the prepared corpus, or a mirror of one."""
    return shared / "data"


def shared_marker(shared: Path, step: str) -> Path:
    """``OUT/shared/.done/STEP.json``: written when the shared step ``step`` finished."""
    return shared / SHARED_MARKERS / f"{step}.json"


#: the marker folder of the shared steps, under ``OUT/shared``
SHARED_MARKERS = ".done"
#: the file of a mirrored data folder naming the folder it mirrors
MIRROR_ORIGIN = ".mirror-of"
#: the prepared data's description (``scanmt prepare``)
DATA_META = "meta.json"

# --------------------------------------------------------------------------- archive

MANIFEST = "manifest.json"
SHARED_TAR = "shared.tar.gz"
PREDICTOR_FERTILITIES = "predictor-fertility.npy"
#: the manifest's keys for the shared work and the runs (spelled as the folders)
MANIFEST_SHARED = SHARED
MANIFEST_RUNS = RUNS
#: the manifest's flag of an archive of runs only (``archive --runs-only``): no ``shared.tar.gz``, and each run's
#: entry records the shared work it trained on
MANIFEST_RUNS_ONLY = "runs_only"
#: the manifest's figure window (``archive --max-figure-words`` ...): the attention kept is that of the test
#: sentences within it (:mod:`scanmt.experiments.figure_window`)
MANIFEST_FIGURE_WINDOW = "figure_window"
#: a run folder's record of the shared work it trained on (alignments' and predictor's digests, the archive it
#: came from), written by the restore of an archive of runs only: the folder's own shared work may be another
SHARED_ORIGIN = "shared-origin.json"
#: what of shared/ stays behind: the fertility predictor (a model, retrained from the archived alignments
#: on restore: its training is deterministic) and the fertility caches (recomputed from it by `run`), with
#: their step markers, so that `run` and `restore` redo them
LEFT_OUT_SHARED = ("predictor/", "data/fertility/", ".done/predictor.json", ".done/fertility-")
#: what shared/ holds that decides results: alignments and aligner models (the fertility caches follow
#: from them and the predictor)
IDENTITY_DIRS = ("data/align",)
#: the fertility predictor's checkpoint, relative to ``OUT/shared``
PREDICTOR = "predictor/best.pt"
#: the grid files an archive keeps (``grids/NAME.yaml``, ``grids/NAME.json``)
GRID_FILE_SUFFIXES = (".json", ".yaml")
#: the suffix of a checkpoint, which an archive leaves out
CHECKPOINT_SUFFIX = ".pt"
#: the suffix of an attention file (``{split}.attn.npz``), which an archive keeps only for seed 1's main split
ATTENTION_SUFFIX = ".attn.npz"


def archived_run(dest: Path, key: str) -> Path:
    """``DEST/runs/SYSTEM/seedK.tar.gz``: the archive member of run ``key``."""
    system, seed = key.split("/")
    return dest / RUNS / system / f"{seed}.tar.gz"


def raw_name(split: str, lang: str) -> str:
    """``{split}.raw.{lang}``: a prepared split's raw text (``scanmt prepare``), what the runs translate and score."""
    return f"{split}.raw.{lang}"


# --------------------------------------------------------------------------- report (``experiment report --out DOCS``)


def report_markdown(docs: Path, stem: str) -> Path:
    """``DOCS/STEM.md``: a grid's report."""
    return docs / f"{stem}.md"


def report_json(docs: Path, stem: str) -> Path:
    """``DOCS/STEM.json``: its numbers (:mod:`scanmt.experiments.report.results_json`)."""
    return docs / f"{stem}.json"


def report_stem(markdown: Path) -> str:
    """The stem of a report's Markdown file."""
    return markdown.name[: -len(".md")]


def report_figure_dir(docs: Path, stem: str) -> Path:
    """``DOCS/STEM/``: the report's figures."""
    return docs / stem


def report_figure(docs: Path, stem: str, name: str, grid: str | None = None) -> Path:
    """``DOCS/STEM/NAME``: a figure of a report; ``DOCS/STEM/GRID-NAME`` in a report of several grids, whose figures
    share the folder."""
    return report_figure_dir(docs, stem) / (f"{grid}-{name}" if grid else name)


def attention_figure_name(sentence: int) -> str:
    """``attention-N.png``: the attention maps of test sentence ``sentence`` (1-based)."""
    return f"attention-{sentence}.png"


def bpe_name(split: str, lang: str) -> str:
    """``{split}.bpe.{lang}``: a prepared split's subwords (``scanmt prepare``)."""
    return f"{split}.bpe.{lang}"


def stripped_dir(staging: Path, key: str) -> Path:
    """``.SYSTEM-seedK.stripped`` in a pack's staging folder: where run ``key``'s files stripped of their copies
    of the test set are written before they go into its tarball."""
    return staging / f".{key.replace('/', '-')}.stripped"


def restoring_dir(final: Path) -> Path:
    """``.NAME.restoring`` beside ``final``: where a restore unpacks a tarball before renaming it into place."""
    return final.parent / f".{final.name}.restoring"
