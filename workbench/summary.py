"""The run summary: :class:`RunSummary`, the figures every run has as typed fields, and the fragments that the
run's pieces contribute, each under the name of the stage or section that contributed it.

A training run's summary is made once, by :meth:`workbench.train.program.TrainingProgram.summarize`:

* the counted figures every run has (:func:`workbench.train.recorder.summarize_ranks`: losses, accuracies, bytes,
  times), its stages as they ran (:func:`workbench.composition.stages_summary`) and its peak memory are the typed
  fields;
* on every rank, the steps, the exchange, the sync and the trainer return their pieces of the rank's result as
  named fragments (:meth:`Steps.rank_fragments <workbench.train.loop.Steps.rank_fragments>`, merged by
  :func:`merge_fragments` under the rank result's ``fragments``);
* on the client, the trainer turns the ranks' results into the run's fragments
  (:meth:`Trainer.summary_fragments <workbench.train.program.Trainer.summary_fragments>`): its settings and
  figures (sampling statistics, the cache, the schedule, PSC-GCN's, model averaging, G3's bins), the exchange's,
  and SANCUS's staleness figures only when a staleness policy is on;
* :func:`workbench.runtime.launch.launch` adds the run's own (``run``: id, runner, wall time; ``network``: the
  modelled communication; ``measures``).

A :class:`RunSummary` is a read-only :class:`~collections.abc.Mapping` whose flat keys are the JSON keys of the
run summary (``summary["losses"]``, ``summary["broadcasts_skipped"]``), and :meth:`RunSummary.to_dict` is that
flat JSON-safe dict (what the run log's ``run_finished`` event and ``--json`` hold). A fragment never overwrites a
field or another fragment: a key contributed twice is a bug, refused with :class:`FragmentCollision`.
"""

from __future__ import annotations

import copy
import dataclasses
import html
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Iterator, Optional

__all__ = ["RunSummary", "FragmentCollision", "merge_fragments", "rank_fragment", "json_safe"]


class FragmentCollision(ValueError):
    """A summary key (or a rank's fragment name) contributed twice: a bug in the contributors, never resolved by
    letting one overwrite the other."""


def json_safe(value: Any) -> Any:
    """A copy of ``value`` made of JSON types: mappings as dicts, tuples and lists as lists, numpy scalars and
    arrays as Python numbers and lists (other values as they are).

    Example:
        >>> import numpy as np
        >>> json_safe({"a": (1, np.int64(2)), "b": np.array([0.5])})
        {'a': [1, 2], 'b': [0.5]}
    """
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist") and type(value).__module__ == "numpy":
        return value.tolist()
    return copy.deepcopy(value)


def merge_fragments(*sources: Optional[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The named fragments of several contributors as one ``{name: {key: value}}`` dict (in their order); a name
    given by two of them is refused (:class:`FragmentCollision`).

    Example:
        >>> merge_fragments({"exchange": {"max_age": 1}}, None, {"sync": {"num_syncs": 3}})
        {'exchange': {'max_age': 1}, 'sync': {'num_syncs': 3}}
        >>> merge_fragments({"sync": {}}, {"sync": {}})
        Traceback (most recent call last):
        ...
        workbench.summary.FragmentCollision: fragment 'sync' contributed twice
    """
    out: dict[str, dict[str, Any]] = {}
    for source in sources:
        for name, values in (source or {}).items():
            if name in out:
                raise FragmentCollision(f"fragment {name!r} contributed twice")
            out[name] = dict(values)
    return out


def rank_fragment(result: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Fragment ``name`` of one rank's result (its ``fragments``; ``{}`` when the rank contributed none)."""
    return (result.get("fragments") or {}).get(name) or {}


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class RunSummary(Mapping):
    """The summary of one run: the figures every run has as typed fields, plus the fragments the run's stages
    contributed (module docstring). A read-only mapping of the flat JSON keys: the fields, then every fragment's
    keys (in the fragments' order); a field left ``None`` (a run without stages) is no key.

    Example:
        >>> s = RunSummary.counted(program="full_graph", world_size=2, losses=[1.5, 1.25],
        ...                        fragments={"exchange": {"exchange": "halo", "comm_reduction": 0.0}})
        >>> s["losses"][-1], s["exchange"], s.epochs, s.fragment("exchange")["comm_reduction"]
        (1.25, 'halo', 2, 0.0)
        >>> "staleness" in s, list(s.fragments)
        (False, ['exchange'])
        >>> s = s.with_fragments({"staleness": {"staleness": "epoch-fixed", "max_age": 1}})
        >>> s
        RunSummary(program='full_graph', world_size=2, epochs=2, loss=1.25, fragments=[exchange, staleness])
        >>> import json
        >>> json.loads(json.dumps(s.to_dict()))["max_age"]
        1
        >>> s.with_fragments({"prefetch": {"max_age": 2}})
        Traceback (most recent call last):
        ...
        workbench.summary.FragmentCollision: key 'max_age' of fragment 'prefetch' is already the summary's (fragment 'staleness')
    """

    program: str
    world_size: int
    epochs: int
    losses: list
    """The global loss of every epoch."""
    accuracy: dict
    """``{"train", "val", "test"}``: the last epoch's accuracies (None: not scored)."""
    accuracy_by_epoch: dict
    bytes_by_kind: dict
    """Bytes of the whole run by traffic kind, every rank's."""
    bytes_per_epoch: int
    """The exchange's bytes of an epoch (the last one's, or the trainer's mean where epochs differ)."""
    bytes_by_epoch: list
    bytes_per_epoch_by_kind: dict
    predicted_bytes_per_epoch: int
    predicted_bytes_per_epoch_by_kind: dict
    epoch_times: list
    """Wall seconds of every epoch (the slowest rank's)."""
    compute_s: list
    comm_s: list
    comm_critical_s: list
    comm_calls: list
    param_checksums: dict
    time_breakdown: dict
    """Every rank's seconds per epoch by step phase (:func:`workbench.train.recorder.time_breakdown`)."""
    partition: Optional[str] = None
    """The partition's label (:func:`workbench.composition.stages_summary`)."""
    model: Optional[str] = None
    stages: Optional[dict] = None
    """Every section of the config with its method and options as the run used them."""
    peak_rss_mb: Optional[dict] = None
    """``{"client": MiB, "ranks": [MiB per rank]}``: each process's peak resident memory."""
    fragments: Mapping = dataclasses.field(default_factory=dict)
    """``{name: {key: value}}``: what each stage or section contributed (read-only)."""

    def __post_init__(self) -> None:
        fragments = {str(name): dict(values) for name, values in dict(self.fragments).items()}
        owner = {f.name: None for f in self._fields() if getattr(self, f.name) is not None}
        for name, values in fragments.items():
            for key in values:
                if key in owner:
                    whose = "a field" if owner[key] is None else f"fragment {owner[key]!r}"
                    raise FragmentCollision(f"key {key!r} of fragment {name!r} is already the summary's ({whose})")
                owner[key] = name
        object.__setattr__(self, "fragments",
                           MappingProxyType({n: MappingProxyType(v) for n, v in fragments.items()}))
        object.__setattr__(self, "_owner", owner)

    @classmethod
    def _fields(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(cls) if f.name != "fragments"]

    @classmethod
    def counted(cls, *, program: str, world_size: int, losses: list, **fields: Any) -> "RunSummary":
        """A summary with only the given figures (the others empty): what a test or an example needs.

        >>> RunSummary.counted(program="p", world_size=1, losses=[0.5]).bytes_by_epoch
        []
        """
        epochs = len(losses)
        empty: dict[str, Any] = {"epochs": epochs, "accuracy": {k: None for k in ("train", "val", "test")},
                                 "accuracy_by_epoch": {k: [None] * epochs for k in ("train", "val", "test")},
                                 "bytes_by_kind": {}, "bytes_per_epoch": 0, "bytes_by_epoch": [],
                                 "bytes_per_epoch_by_kind": {}, "predicted_bytes_per_epoch": 0,
                                 "predicted_bytes_per_epoch_by_kind": {}, "epoch_times": [], "compute_s": [],
                                 "comm_s": [], "comm_critical_s": [], "comm_calls": [], "param_checksums": {},
                                 "time_breakdown": {}}
        return cls(program=program, world_size=world_size, losses=list(losses), **{**empty, **fields})

    # -- fragments ---------------------------------------------------------------------------------------------
    def fragment(self, name: str) -> Mapping[str, Any]:
        """The keys fragment ``name`` contributed (read-only; ``KeyError`` when no piece of the run gave it)."""
        return self.fragments[name]

    def owner(self, key: str) -> Optional[str]:
        """The fragment that contributed ``key`` (None: a field of every summary; ``KeyError``: no such key).

        >>> RunSummary.counted(program="p", world_size=1, losses=[], fragments={"sync": {"num_syncs": 2}}).owner(
        ...     "num_syncs")
        'sync'
        """
        return self._owner[key]

    def with_fragments(self, fragments: Mapping[str, Mapping[str, Any]]) -> "RunSummary":
        """A new summary with ``fragments`` added after this one's (a name or a key given twice is refused)."""
        return dataclasses.replace(self, fragments=merge_fragments(self.fragments, fragments))

    # -- Mapping -----------------------------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        owner = self._owner[key]
        return getattr(self, key) if owner is None else self.fragments[owner][key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner)

    def __len__(self) -> int:
        return len(self._owner)

    def __contains__(self, key: object) -> bool:
        return key in self._owner

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON-safe summary (a copy): every key of the mapping with its value."""
        return {key: json_safe(self[key]) for key in self}

    def __reduce__(self):
        fields = {f.name: getattr(self, f.name) for f in self._fields()}
        return (_rebuild, (fields, {n: dict(v) for n, v in self.fragments.items()}))

    # -- display -----------------------------------------------------------------------------------------------
    def _headline(self) -> list[tuple[str, Any]]:
        losses, acc = self.losses, self.accuracy or {}
        out = [("program", self.program), ("world_size", self.world_size), ("epochs", self.epochs)]
        if losses:
            out.append(("loss", losses[-1]))
        out += [(f"{k}_acc", acc[k]) for k in ("train", "val", "test") if acc.get(k) is not None]
        if self.bytes_per_epoch:
            out.append(("bytes_per_epoch", self.bytes_per_epoch))
        return out

    def __repr__(self) -> str:
        def fmt(v: Any) -> str:
            return f"{v:.4g}" if isinstance(v, float) else repr(v)

        parts = [f"{k}={fmt(v)}" for k, v in self._headline()]
        return f"RunSummary({', '.join(parts)}, fragments=[{', '.join(self.fragments)}])"

    def _repr_html_(self) -> str:
        """A table for notebooks: the headline figures, then one row per fragment with its keys."""
        def cell(v: Any) -> str:
            if isinstance(v, float):
                text = "nan" if math.isnan(v) else f"{v:.4g}"
            elif isinstance(v, (list, dict)):
                text = f"{type(v).__name__} of {len(v)}"
            else:
                text = repr(v) if isinstance(v, str) else str(v)
            return html.escape(text)

        rows = [f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{cell(v)}</td></tr>"
                for k, v in self._headline()]
        for name, values in self.fragments.items():
            shown = ", ".join(f"{html.escape(k)}={cell(v)}" for k, v in values.items())
            rows.append(f"<tr><th style='text-align:left'>[{html.escape(name)}]</th><td>{shown}</td></tr>")
        return f"<table class='run-summary'><caption>RunSummary</caption>{''.join(rows)}</table>"


def _rebuild(fields: dict, fragments: dict) -> RunSummary:
    return RunSummary(**fields, fragments=fragments)
