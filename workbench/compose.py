"""A run is a composition of stage configs: :class:`RunConfig`.

Sections (each a nested, validated config)::

    graph, num_parts          the data and the number of parts (= ranks)
    partition   {method, ...} registry("partition"): metis, random, block, ... with that method's options
    sample      {method, ...} registry("sample"):   None = full-graph training
    cache       {method, ...} registry("cache"):    None = no feature cache
    exchange    {method, ...} registry("exchange"): halo, block_row (+ staleness: SANCUS / SkipG)
    model       {method, ...} registry("model"):    gcn, sage (hidden, num_layers)
    schedule    {method, ...} registry("schedule"): None = sample inline; launch-score, fixed-depth, ... =
                              sampling DAGs in worker processes (ByteGNN; needs a sampler)
    sync        {method, ...} registry("sync"):     allreduce = gradients every step; model_avg = CATGNN's
                              local training per part, models averaged every ``interval`` epochs
    loss        {method, ...} registry("loss"):     cross_entropy (node classification), link (ByteGNN's
                              unsupervised objective; needs a schedule)
    evaluate    {method, ...} registry("evaluate"): auto (the trainer's way), outputs, whole_part, sampled,
                              per_part (how an epoch is scored)
    step        {method, ...} registry("step"):     whole_part (every layer on the whole part through the
                              exchange), binned (G3's bins: bin_limit, pipeline, memory_budget)
    train       epochs, lr, optimizer, weight_decay, seed (the training loop)

A section holds the ``Config`` of the chosen method (``MetisPartitioner.Config(balance_train=True)``);
``cfg.method("partition")`` names it, and a field is read through its section (``cfg.train.epochs``,
``cfg.model.hidden``). Settings are applied by :mod:`workbench.compose_settings`, the same on the command line
(``--set partition.method=random``, ``--set exchange.staleness=epoch-fixed``), in the dashboard form and in
:meth:`RunConfig.replace` / :meth:`RunConfig.with_strings` / :meth:`RunConfig.compose`. Every setting names
its section; these forms exist, and no others:

* ``graph=SPEC`` and ``num_parts=N``: the top-level fields;
* ``SECTION=NAME`` or ``SECTION.method=NAME`` switches a stage section's method (fields of the same name are
  kept; ``none`` empties an optional section: sample, cache, exchange, schedule);
* ``SECTION=CONFIG`` (a method's ``Config`` object), ``SECTION=None`` and ``train=TrainLoopConfig(...)``:
  Python values, in ``replace`` and ``compose`` only;
* ``SECTION={FIELD: VALUE, ...}``: a dict of the section's settings (``model={"hidden": 16}``,
  ``sample={"method": "neighbor", "fanouts": (5, 5)}``); its ``method`` switches first, then the fields are
  set on the chosen method (strings in ``with_strings``);
* ``SECTION.FIELD=VALUE`` sets a field of the section's chosen method (``train.FIELD`` a field of the loop;
  ``**{"model.hidden": 16}`` in Python, ``--set model.hidden=16`` on the command line);
* two shorthands (:data:`~workbench.compose_settings.SHORTHANDS`, the CLI's ``--epochs`` and ``--seed``):
  ``epochs=N`` is ``train.epochs=N``; ``seed=N`` seeds every section that has a seed (weights, partitioner,
  sampler) and whose own seed is not given (``seed=3, **{"partition.seed": 9}``: the partitioner 9, the rest 3).

One setting given twice with two values (``epochs=1`` beside ``train.epochs=2``, ``partition.method`` beside
``partition``) is refused: one of them would be lost.

Any other name without a section (``hidden=16``) is refused with the dotted names it could mean
(``write model.hidden``). Unknown names and bad values are all reported at once, with the valid names.
Methods are looked up in the registries when the config is validated, so a stage registered later (a new
sampler) is accepted without an edit here. ``build()`` checks that every stage's needs are met (:mod:`workbench.composition`)
and returns the program: full-graph training when ``sample`` is None, the mini-batch program otherwise.

Example:
    >>> cfg = RunConfig.compose(graph="karate", partition="random", model={"hidden": 8}, epochs=3)
    >>> cfg.method("partition"), cfg.model.hidden, cfg.train.epochs
    ('random', 8, 3)
    >>> cfg = cfg.with_strings({"exchange.staleness": "epoch-fixed", "exchange.epsilon": "2"})
    >>> cfg.exchange.staleness, cfg.exchange.epsilon
    ('epoch-fixed', 2.0)
    >>> cfg.with_strings({"partition.method": "metis", "partition.balance_train": "true"}).partition.balance_train
    True
    >>> cfg.replace(model="gat")
    Traceback (most recent call last):
    ...
    workbench._validation.ParamError: The 'model' parameter of RunConfig must be one of ['gcn', 'sage']. Got 'gat' instead.
    >>> cfg.replace(hidden=16)
    Traceback (most recent call last):
    ...
    workbench._validation.ParamError: The 'hidden' parameter of RunConfig must be a section, a dotted name or a shorthand (epochs, seed): write model.hidden. Got 16 instead.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Annotated, Any, Mapping, Optional

from workbench._validation import Config, ErrorCollector
from workbench.constraints import Interval, OneOf
from workbench.compose_settings import NONE, OPTIONAL_SECTIONS, apply_settings, as_text, settable
from workbench.composition import check_composition
from workbench.stages import STAGE_SECTIONS, registry

__all__ = ["RunConfig", "STAGE_SECTIONS", "OPTIONAL_SECTIONS", "STAGE_ENTRY_POINTS", "load_stage_modules", "as_text"]


_STAGE_MODULES = ("workbench.partition", "workbench.train", "workbench.sample", "workbench.cache",
                  "workbench.schedule", "workbench.train.minibatch", "workbench.train.model_averaging",
                  "workbench.schedule.program", "workbench.train.evaluation",
                  "workbench.train.step")
"""Modules whose import registers stage methods and trainers (:data:`workbench.composition.TRAINERS`)."""


_LOADED: set[str] = set()


STAGE_ENTRY_POINTS = "workbench.stages"
"""Entry-point group of the modules that register stage methods from outside the package (a package's
``pyproject.toml``: ``[project.entry-points."workbench.stages"]`` ``mine = "my_package.losses"``)."""


def load_stage_modules() -> None:
    """Import the packages that register stage methods (each once per process), then the modules that installed
    packages name in the ``workbench.stages`` entry-point group (:data:`STAGE_ENTRY_POINTS`): their methods are
    then selectable with ``--set`` like the built-in ones."""
    if STAGE_ENTRY_POINTS not in _LOADED:
        _LOADED.add(STAGE_ENTRY_POINTS)   # first: a plugin importing workbench modules calls this again
        _load_entry_points()
    for name in _STAGE_MODULES:
        if name not in _LOADED:
            importlib.import_module(name)
            _LOADED.add(name)
    for kind in STAGE_SECTIONS.values():
        registry(kind)


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=STAGE_ENTRY_POINTS):
        ep.load()   # a module (or an object in it): importing it registers its methods


def _default(kind: str, method: str):
    def make():
        load_stage_modules()
        return registry(kind).config_class(method)()
    return make


def _train_config():
    from workbench.train.loop import TrainLoopConfig

    return TrainLoopConfig()


@dataclasses.dataclass(kw_only=True)
class RunConfig(Config):
    """A run: the graph, the number of parts and one config per stage (see the module docstring)."""

    graph: Any = "karate"
    """Graph spec for ``workbench.data.load_graph`` (e.g. ``karate`` or ``sbm:num_nodes=2000,seed=0``)."""
    num_parts: Annotated[Optional[int], OneOf(None, Interval(1, None))] = None
    """Number of parts = ranks. ``None`` takes the runner's number of workers."""
    partition: Any = dataclasses.field(default_factory=_default("partition", "metis"))
    """How vertices are grouped into parts: a ``partition`` method and its options."""
    sample: Any = None
    """Neighbour sampling (mini-batch training); ``none`` = full-graph training."""
    cache: Any = None
    """Remote-feature cache of a mini-batch trainer; ``none`` = every remote feature is pulled."""
    exchange: Any = dataclasses.field(default_factory=_default("exchange", "halo"))
    """How embeddings and gradients move in full-graph training (and their staleness)."""
    model: Any = dataclasses.field(default_factory=_default("model", "gcn"))
    """The GNN: ``gcn`` or ``sage`` with its width and depth."""
    train: Any = dataclasses.field(default_factory=_train_config)
    """The training loop: epochs, learning rate, optimiser, weight decay, seed."""
    schedule: Any = None
    """Sampling DAGs in worker processes and their scheduler (ByteGNN); ``none`` = sample inline."""
    sync: Any = dataclasses.field(default_factory=_default("sync", "allreduce"))
    """How the replicas stay together: gradients all-reduced every step, or CATGNN's model averaging."""
    loss: Any = dataclasses.field(default_factory=_default("loss", "cross_entropy"))
    """What a step minimises: node classification's cross-entropy, or the link objective."""
    evaluate: Any = dataclasses.field(default_factory=_default("evaluate", "auto"))
    """How an epoch is scored: the trainer's own way (``auto``), whole parts, sampled, per part."""
    step: Any = dataclasses.field(default_factory=_default("step", "whole_part"))
    """How one full-graph forward runs: every layer on the whole part (``whole_part``), or G3's bins (``binned``)."""
    _methods: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)
    """Section -> method name chosen by name (two methods may share one ``Config`` class)."""
    _derived: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)
    """Dotted name -> the setting it was taken from (``{"model.num_layers": "sample.fanouts"}``)."""

    # -- sections ------------------------------------------------------------------------------------------
    @staticmethod
    def section_names() -> list[str]:
        """Every section: the stage sections, then ``train``."""
        return [*STAGE_SECTIONS, "train"]

    @staticmethod
    def stage_sections() -> list[str]:
        """The sections with a method choice (a stage registry)."""
        return list(STAGE_SECTIONS)

    def method(self, section: str) -> str:
        """The method chosen for a stage section (``none`` for an empty optional section)."""
        cfg = getattr(self, section)
        if cfg is None:
            return NONE
        reg = registry(STAGE_SECTIONS[section])
        chosen = self._methods.get(section)
        if chosen in reg and type(cfg) is reg[chosen].Config:
            return chosen
        return reg.name_of(cfg) or type(cfg).__qualname__

    def named_method(self, section: str) -> Optional[str]:
        """The method of ``section`` when a setting chose it by name (``--set partition.method=random``,
        ``compose(partition="random")``), else ``None`` (a recipe's ``Config`` object, or the default): what the
        user said, as opposed to what the recipe holds.

        Example:
            >>> RunConfig().named_method("partition"), RunConfig.compose(partition="random").named_method("partition")
            (None, 'random')
        """
        chosen = self._methods.get(section)
        return chosen if chosen is not None and chosen == self.method(section) else None

    def sections(self) -> dict[str, Optional[Config]]:
        """Section name -> its config (None when empty)."""
        return {name: getattr(self, name) for name in self.section_names()}

    @staticmethod
    def method_choices(section: str) -> list[str]:
        """Registered methods of a stage section (``none`` first where the section may be empty)."""
        load_stage_modules()
        names = sorted(registry(STAGE_SECTIONS[section]))
        if section in OPTIONAL_SECTIONS:   # "none" empties the section (a registered "none" method is that)
            return [NONE, *(n for n in names if n != NONE)]
        return names

    # -- validation ----------------------------------------------------------------------------------------
    def _validate(self, errs: ErrorCollector) -> None:
        from workbench.graph import Graph

        errs.check(isinstance(self.graph, (str, Graph)) and bool(self.graph), "graph", "a non-empty graph spec",
                   self.graph)
        load_stage_modules()
        for section, kind in STAGE_SECTIONS.items():
            cfg = getattr(self, section)
            if cfg is None and section in OPTIONAL_SECTIONS:
                continue
            if cfg is None or registry(kind).name_of(cfg) is None:
                errs.check(False, section, f"the Config of a registered {kind} method: one of "
                           f"{self.method_choices(section)}", type(cfg).__qualname__ if cfg is not None else None)
        from workbench.train.loop import TrainLoopConfig

        errs.check(isinstance(self.train, TrainLoopConfig), "train", "a TrainLoopConfig", type(self.train).__name__)
        fanouts, layers = self._fanouts_and_layers()
        errs.check(fanouts is None or len(fanouts) == layers, "sample.fanouts",
                   f"one fan-out per model layer (model.num_layers={layers}; set sample.fanouts alone and the layer "
                   "count follows it)", fanouts)
        # which stages a trainer can use (a cache or a schedule in full-graph training, an exchange in
        # mini-batch training) is checked as declared data when the program is built: workbench.composition

    def _fanouts_and_layers(self) -> tuple[Optional[tuple], Optional[int]]:
        """``(sample.fanouts, model.num_layers)`` when a layer-wise sampler feeds the model (the mini-batch
        programs: one block per layer), else ``(None, None)``."""
        fanouts, layers = getattr(self.sample, "fanouts", None), getattr(self.model, "num_layers", None)
        if not isinstance(fanouts, tuple) or not isinstance(layers, int) or isinstance(layers, bool):
            return None, None
        if getattr(registry("sample").get(self.method("sample")), "trains_with", None):   # trains its own way
            return None, None
        return fanouts, layers

    def notes(self) -> list[str]:
        """One line per setting the config took from another (``model.num_layers=2 (from sample.fanouts)``);
        the run summary repeats them under ``notes``."""
        return [f"{name}={as_text(self._get(name))} (from {source})" for name, source in self._derived.items()]

    def _get(self, dotted: str) -> Any:
        section, _, field = dotted.partition(".")
        return self.method(section) if field == "method" else getattr(getattr(self, section), field)

    # -- names ---------------------------------------------------------------------------------------------
    def settable_names(self) -> list[str]:
        """The dotted names of this config (``graph``, ``partition.method``, ``partition.seed``, ...)."""
        return settable(self.sections())

    def to_strings(self) -> dict[str, str]:
        """``{dotted name: text}`` of every setting (what ``with_strings`` reads back)."""
        out = {"graph": as_text(self.graph), "num_parts": as_text(self.num_parts)}
        for section, cfg in self.sections().items():
            if section in STAGE_SECTIONS:
                out[f"{section}.method"] = self.method(section)
            if cfg is not None:
                out.update({f"{section}.{f}": as_text(getattr(cfg, f)) for f in type(cfg).field_names()})
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"graph": self.graph if isinstance(self.graph, str) else getattr(self.graph, "name", ""),
                               "num_parts": self.num_parts}
        for section, cfg in self.sections().items():
            if cfg is None:
                out[section] = None
                continue
            d = cfg.to_dict()
            out[section] = {"method": self.method(section), **d} if section in STAGE_SECTIONS else d
        return out

    # -- settings ------------------------------------------------------------------------------------------
    @classmethod
    def compose(cls, **settings: Any) -> "RunConfig":
        """A config from defaults and ``settings`` (top-level fields, sections, dotted names, the shorthands
        ``epochs`` and ``seed``; see the module docstring)."""
        return cls().replace(**settings)

    def replace(self, **changes: Any) -> "RunConfig":
        """A copy with ``changes`` applied (values as Python objects); all errors reported at once."""
        return self._apply(changes, strings=False)

    def with_strings(self, settings: Mapping[str, str]) -> "RunConfig":
        """A copy with ``NAME=VALUE`` strings applied (``--set`` or the form), converted to each field's type."""
        return self._apply(dict(settings), strings=True)

    def _apply(self, settings: Mapping[str, Any], *, strings: bool) -> "RunConfig":
        load_stage_modules()
        return apply_settings(self, settings, strings=strings)

    # -- build ---------------------------------------------------------------------------------------------
    def build(self, *, graph: Any = None, node_part: Any = None):
        """The run's :class:`~workbench.train.program.TrainingProgram` with the trainer this config trains with
        (:func:`workbench.composition.trainer_class`: full-graph, mini-batch, mini-batch with a schedule, or the
        trainer an edge sampler or a sync method names), after :func:`~workbench.composition.check_composition`
        found every stage's needs met.

        Raises:
            ParamError: a stage needs what neither the program nor another stage provides (before anything
                is loaded or any worker starts).
        """
        trainer = check_composition(self)
        from workbench.train.program import TrainingProgram   # the train package imports this module

        return TrainingProgram(self, trainer, graph=graph, node_part=node_part)

