"""``align`` in gold mode: AER of eflomal on a gold set (RWTH De–En) appended to the training text.

:func:`read_gold` reads and checks every input; :func:`evaluate_gold` runs eflomal
(both directions) on the training text plus the gold sentences and scores the gold
part: each direction, and each symmetrization.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

from scanmt.api.align import AlignRequest, read_pair
from scanmt.api.align_train import LEVEL_FILES
from scanmt.data.align import Aligner, AlignerSettings, project_to_words
from scanmt.data.prepare import read_meta
from scanmt.data.symmetrize import METHODS, symmetrize
from scanmt.errors import ConfigError, DataError
from scanmt.io import atomic_open
from scanmt.metrics.links import read_links

GOLD_LANGS = ("de", "en")  # talp links: German index first

Sentences = list[list[str]]


@dataclass
class GoldTask:
    """The inputs of a gold evaluation, read and checked (German on the aligner's source side)."""

    gold_dir: Path
    data: Path
    level: str
    settings: AlignerSettings
    #: gold links ``(sure, possible)`` per gold sentence
    gold: list[tuple[set, set]]
    #: the training text, then the gold sentences, as the aligner sees them (subwords at the subword level)
    train_de: Sentences
    train_en: Sentences
    gold_de: Sentences
    gold_en: Sentences

    @property
    def n_train(self) -> int:
        return len(self.train_de)

    @property
    def n_gold(self) -> int:
        return len(self.gold_de)


@dataclass
class GoldResult:
    """AER, precision and recall per alignment (forward, reverse, each symmetrization)."""

    task: GoldTask
    results: dict[str, dict]
    seconds: float

    def report(self) -> dict:
        t = self.task
        return {
            "gold": str(t.gold_dir), "data": str(t.data), "level": t.level, "n_train": t.n_train, "n_gold": t.n_gold,
            "settings": dataclasses.asdict(t.settings), "seconds": self.seconds, "results": self.results,
        }

    def write_json(self, path: str | Path) -> None:
        with atomic_open(path) as fh:
            json.dump(self.report(), fh, indent=2)
            fh.write("\n")


def gold_scores(gold: list[tuple[set, set]], hyp: list[set]) -> dict:
    """Corpus AER (:func:`scanmt.metrics.aer.aer`, Och & Ney 2003) with precision and recall.

    ``precision = |A∩P| / |A|``, ``recall = |A∩S| / |S|`` (fractions; AER in percent
    as the metrics module returns it).
    """
    from scanmt.metrics.aer import aer

    a_s = sum(len(a & s) for a, (s, _) in zip(hyp, gold))
    a_p = sum(len(a & (p | s)) for a, (s, p) in zip(hyp, gold))
    n_a = sum(map(len, hyp))
    n_s = sum(len(s) for s, _ in gold)
    return {
        "aer": aer(hyp, gold),
        "precision": a_p / n_a if n_a else 0.0,
        "recall": a_s / n_s if n_s else 0.0,
        "links": n_a,
    }


def _subword_gold(data: Path, gold_dir: Path, g_de: Sentences, g_en: Sentences) -> tuple[Sentences, Sentences]:
    """The gold sentences in subwords; a :class:`DataError` where a sentence's words cannot be recovered."""
    from scanmt.data.subword import SubwordModel, word_index

    de, en = GOLD_LANGS
    spm = SubwordModel(data / "spm.model")
    a_de = [spm.encode(" ".join(x)) for x in g_de]
    a_en = [spm.encode(" ".join(x)) for x in g_en]
    for n, (pieces, words, lang) in enumerate(
        [(p, w, de) for p, w in zip(a_de, g_de)] + [(p, w, en) for p, w in zip(a_en, g_en)]
    ):
        n_words = (word_index(pieces)[-1] + 1) if pieces else 0
        if n_words != len(words):
            raise DataError(
                f"{gold_dir / f'test.{lang}'}:{n % len(g_de) + 1}: subword encoding gives {n_words} words "
                f"for {len(words)} tokens, cannot project links back to words"
            )
    return a_de, a_en


def read_gold(request: AlignRequest) -> GoldTask:
    """The gold set of ``request.eval_gold`` and the training text of ``request.data``, checked."""
    gold_dir = Path(request.eval_gold)
    if request.data is None:
        raise ConfigError("--eval-gold needs --data DIR: the prepared data whose training text the gold set joins")
    level = request.level or "word"
    if level == "both":
        raise ConfigError("--eval-gold: pick --level word or --level subword")
    data = Path(request.data)
    meta = read_meta(data)
    langs = (meta["src_lang"], meta["tgt_lang"])
    if set(langs) != set(GOLD_LANGS):
        raise DataError(f"{request.data}: gold set is {GOLD_LANGS[0]}-{GOLD_LANGS[1]} but the data is {langs[0]}-{langs[1]}")
    de, en = GOLD_LANGS
    g_de, g_en = read_pair(gold_dir / f"test.{de}", gold_dir / f"test.{en}")
    gold = read_links(gold_dir / "test.talp", one_indexed=True,
                      src_lens=[len(x) for x in g_de], tgt_lens=[len(x) for x in g_en])
    kind = LEVEL_FILES[level]
    t_de, t_en = read_pair(data / f"train.{kind}.{de}", data / f"train.{kind}.{en}")
    a_de, a_en = _subword_gold(data, gold_dir, g_de, g_en) if level == "subword" else (g_de, g_en)
    return GoldTask(gold_dir, data, level, request.settings(), gold, t_de, t_en, a_de, a_en)


def evaluate_gold(task: GoldTask) -> GoldResult:
    """Align the training text plus the gold sentences; score the gold part (links projected to words)."""
    aligner = Aligner(task.settings)
    t0 = time.perf_counter()
    fwd, rev = aligner.fit_directional(task.train_de + task.gold_de, task.train_en + task.gold_en)
    seconds = time.perf_counter() - t0
    fwd, rev = fwd[task.n_train:], rev[task.n_train:]
    results: dict = {}
    for name, hyp in [("forward (de->en)", fwd), ("reverse (en->de)", rev)] + [
        (m, [symmetrize(f, r, m) for f, r in zip(fwd, rev)]) for m in METHODS
    ]:
        if task.level == "subword":
            hyp = [project_to_words(h, sd, se) for h, sd, se in zip(hyp, task.gold_de, task.gold_en)]
        results[name] = gold_scores(task.gold, hyp)
    return GoldResult(task, results, seconds)
