"""Grid files: the systems of an experiment (``experiments/table1.yaml`` and friends).

A grid is a commented YAML mapping::

    name: table1                    # [A-Za-z0-9_.-]+, names the report (docs/experiments-table1.md)
    description: ...                # free text, printed at the top of the report
    title: ...                      # optional heading of the report's main table
    baseline: softmax               # optional: paired bootstrap against this system (default: "softmax" if
                                    #   the grid has it, else the first system)
    reference_arm: csparsemax       # optional, for an ablation: the system whose difference from its baseline
                                    #   each arm's difference from its own baseline is set against (the
                                    #   report's difference in differences; an arm: a system with a baseline
                                    #   of its own)
    figure: [softmax, csparsemax]   # optional: the two systems of the Figure-2 analogue
    set: [train.max_minutes=60]     # optional: config overrides for every system (list or mapping)
    predictor_set: [...]            # optional: overrides for the fertility predictor (scanmt fertility --set)
    align: {samplers: 1}            # optional: eflomal options of `scanmt align` (symmetrization,
                                    #   eflomal_model, samplers, rel_iterations, null_prior)
    systems:
      - name: softmax               # run directory name, [A-Za-z0-9_.-]+, unique
        label: softmax              # optional: the name in tables (default: name)
        set: [model.attention.transform=softmax]
        tune_penalties: false       # optional: tune CovPenalty's alpha, beta on validation
        reuse_model: null           # optional: decode the model trained by another system (same seed)
                                    #   instead of training one (configs must agree outside `decode`)
        baseline: null              # optional: compare this system with another one instead of the grid's
                                    #   baseline (an ablation arm with the softmax of the same recipe; see
                                    #   scanmt.experiments.baselines)

Overrides are applied in this order: the runner's own keys (data.dir, data.src_lang,
data.tgt_lang, train.seed), the grid's ``set``, the system's ``set``, the fertility
predictor path (filled in automatically), and the command line's ``--set``.

:func:`load_grid` checks the structure and raises :class:`GridError` naming the file,
the system and the key; the configs themselves are checked by the runner
(:func:`scanmt.experiments.planning.plan_runs`) before any heavy work.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scanmt.errors import ConfigError
from scanmt.io import load_yaml, read_text

#: a name that becomes a folder or file name (grid, system, report): matched whole (``fullmatch``; ``$`` would
#: take a name ending in a newline)
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")

#: keys the runner sets itself (from --data, --pair and --seeds)
RUNNER_KEYS: dict[str, str] = {
    "data.dir": "--data",
    "data.src_lang": "--pair",
    "data.tgt_lang": "--pair",
    "train.seed": "--seeds",
}

#: config keys that only set how fast a run goes on the machine at hand (a bf16 forward runs at 0.2-1.9x fp32's
#: speed, depending on the processor: docs/results.md 1b): their change does not make a finished run stale, and
#: a grid's runs may differ in them. Threads and precision change the arithmetic, as another machine does, so
#: each attempt records them (:func:`scanmt.experiments.planning.machine`)
SPEED_KEYS = ("train.threads", "train.precision", "decode.batch_size")

TOP_KEYS = ("name", "description", "title", "baseline", "reference_arm", "figure", "set", "predictor_set", "align",
            "systems")
SYSTEM_KEYS = ("name", "label", "description", "set", "tune_penalties", "reuse_model", "baseline")
#: grid `align:` key -> `scanmt align` option
ALIGN_OPTIONS: dict[str, tuple[str, type]] = {
    "symmetrization": ("--symmetrization", str),
    "eflomal_model": ("--eflomal-model", int),
    "samplers": ("--samplers", int),
    "rel_iterations": ("--rel-iterations", float),
    "null_prior": ("--null-prior", float),
}


class GridError(ConfigError):
    """A grid file (or a ``--set`` given with it) is malformed."""


@dataclass
class System:
    name: str
    label: str
    set: list[str] = field(default_factory=list)
    tune_penalties: bool = False
    reuse_model: str | None = None
    description: str = ""
    baseline: str | None = None  #: the system this one is compared with in the report (None: the grid's)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "set": list(self.set), "tune_penalties": self.tune_penalties,
                "reuse_model": self.reuse_model, "description": self.description, "baseline": self.baseline}


@dataclass
class Grid:
    path: Path
    name: str
    systems: list[System]
    description: str = ""
    title: str = ""
    baseline: str | None = None
    reference_arm: str | None = None  #: set against every arm in the report (see the module docstring)
    figure: list[str] = field(default_factory=list)
    set: list[str] = field(default_factory=list)
    predictor_set: list[str] = field(default_factory=list)
    align: dict[str, Any] = field(default_factory=dict)
    text: str = ""

    def system(self, name: str) -> System:
        for s in self.systems:
            if s.name == name:
                return s
        raise GridError(f"{self.path}: no system named {name!r} (systems: {', '.join(self.names)})")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.systems]

    @property
    def baseline_name(self) -> str:
        if self.baseline:
            return self.baseline
        return "softmax" if "softmax" in self.names else self.systems[0].name

    def align_args(self) -> list[str]:
        out: list[str] = []
        for key, value in self.align.items():
            out += [ALIGN_OPTIONS[key][0], str(value)]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "description": self.description, "title": self.title, "baseline": self.baseline_name,
            "reference_arm": self.reference_arm, "figure": list(self.figure), "set": list(self.set),
            "predictor_set": list(self.predictor_set), "align": dict(self.align), "systems": [s.as_dict() for s in self.systems], "path": str(self.path),
        }


# --------------------------------------------------------------------------- overrides


def _format_value(value: Any) -> str:
    """A YAML scalar/list as the right-hand side of ``key=value`` (parsed back by ``--set``)."""
    if isinstance(value, str):
        try:
            if yaml.safe_load(value) == value:
                return value
        except yaml.YAMLError:
            pass
        return json.dumps(value)
    if value is None:
        return "null"
    return json.dumps(value)


def normalize_overrides(value: Any, where: str) -> list[str]:
    """``set:`` as a list of ``key=value`` strings (a mapping of dotted keys is accepted too).

    Raises:
        GridError: not a list/mapping, an item without ``=``, or a malformed dotted key.
    """
    if value is None:
        return []
    if isinstance(value, dict):
        items = [f"{k}={_format_value(v)}" for k, v in value.items()]
    elif isinstance(value, list):
        items = []
        for k, item in enumerate(value):
            if not isinstance(item, str):
                raise GridError(f"{where}[{k}]: expected a 'key=value' string, got {item!r}")
            items.append(item)
    else:
        raise GridError(f"{where}: expected a list of 'key=value' strings (or a mapping), got {value!r}")
    for item in items:
        check_override(item, where)
    return items


def check_override(item: str, where: str, *, allow_runner_keys: bool = False) -> str:
    """Check one ``key=value`` string; returns the key."""
    if "=" not in item:
        raise GridError(f"{where}: {item!r}: expected key=value, e.g. train.lr=0.5")
    key = item.partition("=")[0].strip()
    if not KEY_RE.fullmatch(key):
        raise GridError(f"{where}: {item!r}: {key!r} is not a dotted config key such as model.attention.transform")
    if not allow_runner_keys and key in RUNNER_KEYS:
        raise GridError(f"{where}: {item!r}: {key} is set by `scanmt experiment run` itself (from {RUNNER_KEYS[key]})")
    return key


# --------------------------------------------------------------------------- loading


def _str(value: Any, where: str, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise GridError(f"{where}: expected a{' non-empty' if required else ''} string, got {value!r}")
    return value


def check_name(value: Any, where: str) -> str:
    """``value`` as a name that becomes a folder or file name (:data:`NAME_RE`); a :class:`GridError` after
    ``where`` (a file and key, or an option) otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    name = _str(value, where, required=True)
    if not NAME_RE.fullmatch(name):
        raise GridError(f"{where}: {name!r}: use letters, digits, '_', '.' and '-' only (it names a directory)")
    return name


def _load_system(raw: Any, k: int, path: Path) -> System:
    where = f"{path}: systems[{k}]"
    if not isinstance(raw, dict):
        raise GridError(f"{where}: expected a mapping with name, set, ..., got {raw!r}")
    if "name" not in raw:
        raise GridError(f"{where}: missing 'name'")
    name = check_name(raw["name"], f"{where}.name")
    where = f"{path}: system {name!r}"
    unknown = sorted(set(raw) - set(SYSTEM_KEYS))
    if unknown:
        raise GridError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(SYSTEM_KEYS)})")
    tune = raw.get("tune_penalties", False)
    if not isinstance(tune, bool):
        raise GridError(f"{where}: tune_penalties: expected true/false, got {tune!r}")
    reuse = raw.get("reuse_model")
    if reuse is not None:
        reuse = check_name(reuse, f"{where}: reuse_model")
    baseline = raw.get("baseline")
    if baseline is not None:
        baseline = check_name(baseline, f"{where}: baseline")
    return System(
        name=name,
        label=_str(raw.get("label"), f"{where}: label") or name,
        set=normalize_overrides(raw.get("set"), f"{where}: set"),
        tune_penalties=tune,
        reuse_model=reuse,
        description=_str(raw.get("description"), f"{where}: description"),
        baseline=baseline,
    )


def _read_mapping(path: Path) -> tuple[dict, str]:
    """The top-level mapping of the grid file at ``path`` (known keys only) and the file's text."""
    if not path.exists():
        raise GridError(f"{path}: grid file not found")
    if path.is_dir():
        raise GridError(f"{path}: is a directory, expected a grid YAML file")
    text = read_text(path, "grid file")
    try:
        raw = load_yaml(text, str(path))
    except yaml.YAMLError as exc:
        raise GridError(f"{path}: invalid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise GridError(f"{path}: expected a mapping with name, systems, ... at the top level")
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:
        raise GridError(f"{path}: unknown top-level key {unknown[0]!r} (known: {', '.join(TOP_KEYS)})")
    return raw, text


def _load_systems(raw: dict, path: Path) -> list[System]:
    """The ``systems`` list: each system checked, names unique, ``reuse_model`` pointing at another
    system that does not itself reuse one, ``baseline`` at another system."""
    systems_raw = raw.get("systems")
    if not isinstance(systems_raw, list) or not systems_raw:
        raise GridError(f"{path}: 'systems' must be a non-empty list of systems")
    systems = [_load_system(s, k, path) for k, s in enumerate(systems_raw)]
    seen: set[str] = set()
    for s in systems:
        if s.name in seen:
            raise GridError(f"{path}: system {s.name!r} is listed twice (names must be unique)")
        seen.add(s.name)
    for s in systems:
        if s.reuse_model is None:
            continue
        if s.reuse_model == s.name:
            raise GridError(f"{path}: system {s.name!r}: reuse_model names the system itself")
        if s.reuse_model not in seen:
            raise GridError(f"{path}: system {s.name!r}: reuse_model {s.reuse_model!r} is not a system of this grid")
        src = next(x for x in systems if x.name == s.reuse_model)
        if src.reuse_model is not None:
            raise GridError(
                f"{path}: system {s.name!r}: reuse_model {src.name!r} itself reuses {src.reuse_model!r}; "
                f"point at {src.reuse_model!r} directly"
            )
    for s in systems:
        if s.baseline == s.name:
            raise GridError(f"{path}: system {s.name!r}: baseline names the system itself (leave it out to compare "
                            "with the grid's baseline)")
        if s.baseline is not None and s.baseline not in seen:
            raise GridError(f"{path}: system {s.name!r}: baseline {s.baseline!r} is not a system of this grid")
    return systems


def _baseline_and_figure(raw: dict, names: set[str], path: Path) -> tuple[str | None, list]:
    """``baseline`` (a system name or ``None``) and ``figure`` (``[]`` or two system names)."""
    baseline = raw.get("baseline")
    if baseline is not None:
        baseline = check_name(baseline, f"{path}: baseline")
        if baseline not in names:
            raise GridError(f"{path}: baseline {baseline!r} is not a system of this grid")
    figure = raw.get("figure") or []
    if not isinstance(figure, list) or len(figure) != 2:
        if figure:
            raise GridError(f"{path}: figure: expected two system names [baseline, other], got {figure!r}")
    for f in figure:
        if f not in names:
            raise GridError(f"{path}: figure: {f!r} is not a system of this grid")
    return baseline, list(figure)


def _reference_arm(raw: dict, grid: Grid) -> str | None:
    """``reference_arm``: None, or a system compared with a baseline (not the grid's baseline itself) while some
    other system (an arm) has a baseline of its own."""
    ref, path = raw.get("reference_arm"), grid.path
    if ref is None:
        return None
    ref = check_name(ref, f"{path}: reference_arm")
    if ref not in grid.names:
        raise GridError(f"{path}: reference_arm {ref!r} is not a system of this grid")
    if ref == grid.baseline_name:
        raise GridError(f"{path}: reference_arm {ref!r} is the grid's baseline, which is compared with nothing; name "
                        "the system whose difference from the baseline the arms are set against")
    if not any(s.baseline is not None and s.name != ref for s in grid.systems):
        raise GridError(f"{path}: reference_arm {ref!r}: no other system names a baseline of its own, so there is no "
                        "arm to set against it")
    return ref


def _align_options(raw: dict, path: Path) -> dict:
    """The ``align`` mapping of eflomal options, each of its declared type."""
    align = raw.get("align") or {}
    if not isinstance(align, dict):
        raise GridError(f"{path}: align: expected a mapping of eflomal options, got {align!r}")
    for key, value in align.items():
        if key not in ALIGN_OPTIONS:
            raise GridError(f"{path}: align: unknown option {key!r} (known: {', '.join(ALIGN_OPTIONS)})")
        tp = ALIGN_OPTIONS[key][1]
        ok = isinstance(value, str) if tp is str else (isinstance(value, (int, float)) and not isinstance(value, bool)
                                                       and (tp is float or isinstance(value, int)))
        if not ok:
            raise GridError(f"{path}: align.{key}: expected a{'n integer' if tp is int else ' ' + tp.__name__}, got {value!r}")
    return dict(align)


def load_grid(path: str | Path) -> Grid:
    """Read and check a grid file.

    Raises:
        GridError: missing file, invalid YAML, unknown keys, bad names, duplicate
            systems, unknown ``baseline``/``reference_arm``/``figure``/``reuse_model`` targets (the grid's or
            a system's),
            malformed overrides.
    """
    path = Path(path)
    raw, text = _read_mapping(path)
    if "name" not in raw:
        raise GridError(f"{path}: missing 'name' (it names the report, e.g. name: table1)")
    name = check_name(raw["name"], f"{path}: name")
    systems = _load_systems(raw, path)
    baseline, figure = _baseline_and_figure(raw, {s.name for s in systems}, path)
    align = _align_options(raw, path)
    grid = Grid(
        path=path,
        name=name,
        systems=systems,
        description=_str(raw.get("description"), f"{path}: description"),
        title=_str(raw.get("title"), f"{path}: title"),
        baseline=baseline,
        figure=figure,
        set=normalize_overrides(raw.get("set"), f"{path}: set"),
        predictor_set=normalize_overrides(raw.get("predictor_set"), f"{path}: predictor_set"),
        align=align,
        text=text,
    )
    grid.reference_arm = _reference_arm(raw, grid)
    return grid


def select_systems(grid: Grid, names: list[str] | None) -> list[System]:
    """The systems to run: ``names`` (plus the systems they reuse models from), in grid order."""
    if not names:
        return list(grid.systems)
    wanted = set()
    for n in names:
        s = grid.system(n)
        wanted.add(s.name)
        if s.reuse_model:
            wanted.add(s.reuse_model)
    return [s for s in grid.systems if s.name in wanted]
