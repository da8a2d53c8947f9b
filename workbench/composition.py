"""What stages need from a run, declared as data, and the one check that refuses a run lacking it.

Every stage method declares ``requires`` (capabilities it needs) and ``provides`` (capabilities it gives);
every trainer record (:class:`TrainerSpec`, one per key of :data:`TRAINERS`) declares what its training
``provides``. :func:`check_composition` takes the trainer record a config trains with (:func:`trainer_class`),
collects what it and the chosen stages provide, and refuses every stage whose needs are not met, all at once and
with the one message template, before anything is loaded or any worker starts. A setting that would crash on a rank
or be silently ignored (a cache that the batches never go through, staleness on an exchange that a mini-batch
trainer never calls) is refused here instead.

The capabilities (:data:`CAPABILITIES`):

============================  =========================================================  =====================
capability                    what it is                                                 provided by
============================  =========================================================  =====================
``embedding exchange``        the trainer moves layer embeddings between parts           full-graph training,
                                                                                         edge-sampled training
``whole-part layers``         every layer is computed on whole parts, every edge         full-graph training
``feature source``            batches read remote input rows through a feature source   mini-batch training,
                              (what a cache wraps)                                       edge-sampled training
``inclusion probabilities``   each remote vertex's chance to be an input of a batch      edge samplers (exact),
                                                                                         mini-batch training
                                                                                         (pre-sampled: PreSC)
``sampling tasks``            a sampler whose batches worker processes can produce       mini-batch training
``node labels``               steps that score labelled rows (node classification)      every trainer
``link pairs``                steps that sample each seed's positive and negative        mini-batch training
                              partners (an unsupervised DAG)                             with a schedule
``p2p halo layers``           each layer's halo rows sent point to point, every round    ``halo`` without
                              fresh (what G3's bins, ``step.method=binned``, need)       staleness
``trainer-sampled batches``   batches the trainer's own process samples                  mini-batch training
                                                                                         (no schedule)
``a global seed split``       trainers that split the training vertices among them       mini-batch training
``sampled-edge halos``        an exchange that moves the boundary rows a part's sampled  ``prefetch``
                              edges read                                                 (an exchange)
``whole-part logits``         steps whose forward computes every owned row's logits      full-graph training,
                                                                                         edge-sampled training
``sampled evaluation``        steps that sample evaluation batches with the run's        mini-batch training
                              sampler
``one model per part``        one model per part, averaged                               model averaging
============================  =========================================================  =====================

A method may provide a capability only with some options (:meth:`Stage.provides_for
<workbench.stages.Stage.provides_for>`: ``halo`` with ``staleness=none``).

Fields of any section can declare needs too (``field_requires`` of its ``Config``: the ``whole_part`` step's
``memory_budget`` needs ``whole-part layers`` and ``p2p halo layers``; ``train.batches_ahead`` needs
``trainer-sampled batches``; ``sample.split`` and ``sample.trainers`` need ``a global seed split``, which model
averaging, one model per part, does not provide): set away from their default where their needs are unmet, they
are refused rather than ignored.

A trainer may check more of the composition than capabilities say (:meth:`~workbench.train.program.Trainer.
check_config`: model averaging's ``sync.eval_sample``, which depends on the graph being a partition folder).

A record names the trainer class that runs it; one class may run several keys (``full_graph`` and
``edge_sampled`` are one :class:`~workbench.train.full_graph.FullGraphTrainer`, ``minibatch`` and ``scheduled`` one
:class:`~workbench.train.minibatch.MiniBatchTrainer`): what differs is the record's data and the component it
gives its class, never a subclass.

Needs: every exchange needs an ``embedding exchange`` (``halo`` and ``block_row`` also ``whole-part layers``;
``prefetch`` runs in both trainers: without a sampler it is PipeGCN), and so does every edge sampler (with
``sampled-edge halos``, which ``prefetch`` provides); every cache a ``feature source`` (``inclusion`` also
``inclusion probabilities``); every schedule ``sampling tasks``; every loss ``node labels`` (``link``: ``link
pairs``); the evaluators ``whole_part``, ``sampled`` and ``per_part`` the steps they score (``auto`` and ``outputs``
nothing); the step ``binned`` (G3's bins) ``whole-part layers`` and ``p2p halo layers`` (``whole_part`` nothing). A
new method declares its own.

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", sample="neighbor", schedule="fifo", cache="inclusion")
    >>> check_composition(cfg)
    Traceback (most recent call last):
    ...
    workbench._validation.ParamError: The 'cache.method' parameter of RunConfig must be none or a method that mini-batch training with a schedule can use: 'inclusion' needs inclusion probabilities (each remote vertex's chance to be an input of a batch), provided by sample.method=bns|nodewise|psc|uniform_edge, mini-batch training on sampled blocks. Got 'inclusion' instead.
    >>> spec = trainer_class(cfg.replace(schedule=None))
    >>> spec.key, spec.cls.__name__, trainer_class(cfg).cls.__name__
    ('minibatch', 'MiniBatchTrainer', 'MiniBatchTrainer')
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional

from workbench._validation import ErrorCollector, ParamError, param_error
from workbench.stages import STAGE_SECTIONS, registry

__all__ = ["CAPABILITIES", "TRAINERS", "TrainerSpec", "register_trainer", "trainer_class", "trainer_for", "unmet_needs",
           "unavailable_methods", "check_composition", "stage_classes", "stage_label", "stages_summary"]

CAPABILITIES: dict[str, str] = {
    "embedding exchange": "a trainer that moves layer embeddings between parts",
    "whole-part layers": "a trainer that computes every layer on whole parts, every edge",
    "feature source": "batches that read their remote input rows through a feature source (what a cache wraps)",
    "inclusion probabilities": "inclusion probabilities (each remote vertex's chance to be an input of a batch)",
    "sampling tasks": "a sampler whose batches worker processes can produce",
    "node labels": "steps that score labelled rows (node classification)",
    "p2p halo layers": "an exchange that sends each layer's halo rows point to point, every round fresh (no "
                       "staleness)",
    "trainer-sampled batches": "batches that the trainer's own process samples (not a schedule's workers)",
    "a global seed split": "trainers that split the training vertices among them (not one model per part)",
    "sampled-edge halos": "an exchange that moves the boundary rows a part's sampled edges read (and prefetches them)",
    "link pairs": "steps that sample each seed's positive and negative partners (an unsupervised DAG)",
    "whole-part logits": "steps whose forward computes every owned row's logits (whole parts)",
    "sampled evaluation": "steps that sample evaluation batches with the run's sampler",
    "one model per part": "one model per part, averaged (each part trains alone)",
}
"""Capability -> what it is (the words of the refusals)."""

TRAINERS: dict[str, "TrainerSpec"] = {}
"""The trainers a config can pick, by key: ``full_graph``, ``minibatch``, ``scheduled``, ``edge_sampled``,
``model_averaging``, each a :class:`TrainerSpec` (each module registers its records with :func:`register_trainer`
when it is imported; the modules that register stages import them, :func:`workbench.compose.load_stage_modules`).
The one :class:`~workbench.train.program.TrainingProgram` runs the chosen one. This module imports no trainer:
trainers import it, so the imports point one way."""


@dataclasses.dataclass(frozen=True, eq=False)
class TrainerSpec:
    """One way to train, as a record: the :class:`~workbench.train.program.Trainer` class that runs it and what
    varies between the keys that class runs (the words of the refusals, the capabilities, the default exchange,
    the component it is given). Two keys may name one class: ``edge_sampled`` is full-graph training given the
    sampled-edge component, ``scheduled`` is mini-batch training given the schedule's batch source. No trainer
    class derives from another: what varies is a field of this record.

    Calling the record makes its trainer for a config (what :class:`~workbench.train.program.TrainingProgram`
    does with the record :func:`check_composition` returns).

    Attributes:
        key: its key in :data:`TRAINERS`.
        cls: the trainer class that runs it.
        name: the run's name in run lists, or a function of the config giving it (``minibatch-degree``).
        provides: what this training offers the stages (:data:`CAPABILITIES`).
        trainer: how it trains, in the words of the composition errors ("mini-batch training (...)").
        default_exchange: the exchange a config gets when its sample method switches to this training and it
            gives none.
        instead: section -> what this training offers instead of a refused method of that section (said in the
            refusal).
        rank_processes: whether each rank starts processes of its own (a schedule's sampling workers).
        needs_in_degrees: whether a rank's shard holds every vertex's in-degree (a schedule's NSC cost model).
        component: makes, from the config, what this key adds to its class's plain training (each class says
            what it calls on it); ``None``: nothing.
        batches: where a step's batch comes from, in words (``workbench stages batches`` lists the records by it:
            whole parts, sampled blocks, scheduled blocks, sampled edges, one part after another).
        chosen_by: the settings that choose this record, in ``--set`` words (what ``workbench stages batches``
            says).
    """

    key: str
    cls: type
    name: Any
    provides: frozenset
    trainer: str
    default_exchange: Optional[str] = None
    instead: Mapping[str, str] = dataclasses.field(default_factory=dict)
    rank_processes: bool = False
    needs_in_degrees: bool = False
    component: Optional[Callable[[Any], Any]] = None
    batches: str = ""
    chosen_by: str = ""

    def check_config(self, config: Any, errs: Any) -> None:
        """What the trainer class refuses in ``config`` beyond the declared capabilities
        (:meth:`~workbench.train.program.Trainer.check_config`)."""
        self.cls.check_config(config, errs)

    def run_name(self, config: Any) -> str:
        """The run's name for ``config`` (:attr:`name`, or what it gives for the config)."""
        return self.name(config) if callable(self.name) else self.name

    def __call__(self, config: Any, *, graph: Any = None, node_part: Any = None) -> Any:
        """The trainer of ``config`` (``graph``/``node_part``: runtime objects replacing loading and partitioning)."""
        return self.cls(config, spec=self, graph=graph, node_part=node_part)


def register_trainer(key: str, **record: Any) -> Callable[[type], type]:
    """Class decorator: make ``cls`` the trainer of ``key`` (what :func:`trainer_for` and a sample or sync method's
    ``trains_with`` name) with the :class:`TrainerSpec` fields ``record``. A class may be registered under
    several keys (stack the decorator, or call it on the class from the module that owns the other key)."""
    def register(cls: type) -> type:
        TRAINERS[key] = TrainerSpec(key=key, cls=cls, **record)
        return cls
    return register


def _trainer(key: str, owner: str, section: str, value: Any) -> TrainerSpec:
    if key not in TRAINERS:   # a method names a trainer that no module registered (a plugin's ``trains_with``)
        raise ParamError([param_error(section, owner, f"a method whose trainer is installed (no {key!r} trainer is "
                                      f"registered; registered: {sorted(TRAINERS)})", value)])
    return TRAINERS[key]


def trainer_class(cfg: Any) -> TrainerSpec:
    """The trainer record ``cfg`` trains with: the trainer a sync method names (``model_avg``: local training per
    part); else full-graph training when ``sample`` is none; the trainer a sample method names (edge samplers:
    edge-sampled training); mini-batch training with a schedule when ``schedule`` is set; mini-batch training
    otherwise."""
    sync = getattr(cfg, "sync", None)
    return trainer_for(None if cfg.sample is None else cfg.method("sample"),
                       scheduled=getattr(cfg, "schedule", None) is not None,
                       sync=None if sync is None else cfg.method("sync"), owner=type(cfg).__name__)


def trainer_for(sample: Any, *, scheduled: bool = False, sync: Any = None, owner: str = "RunConfig"
                ) -> TrainerSpec:
    """The trainer record of a sync method that trains its own way, else of a sample method (``None``: full-graph
    training), with or without a schedule."""
    own = getattr(registry("sync").get(sync), "trains_with", None) if sync else None
    if own:
        return _trainer(own, owner, "sync", sync)
    if sample is None:
        return _trainer("full_graph", owner, "sample", "none")
    own = getattr(registry("sample").get(sample), "trains_with", None)
    return _trainer(own or ("scheduled" if scheduled else "minibatch"), owner, "sample", sample)


def stage_classes(cfg: Any) -> dict[str, type]:
    """Section -> the registered class of the method chosen there (empty sections left out)."""
    out = {}
    for section, kind in STAGE_SECTIONS.items():
        if getattr(cfg, section, None) is not None:
            cls = registry(kind).get(cfg.method(section))
            if cls is not None:
                out[section] = cls
    return out


def _providers(capability: str) -> str:
    """Where a capability comes from, in ``--set`` words (stage methods, then trainers)."""
    found = []
    for section, kind in STAGE_SECTIONS.items():
        names = sorted(n for n, cls in registry(kind).items() if capability in _provides(cls, None))
        if names:
            found.append(f"{section}.method={'|'.join(names)}")
    order = ("full_graph", "minibatch", "scheduled", "edge_sampled", "model_averaging")   # the messages' order
    for key in sorted(TRAINERS, key=lambda k: (order.index(k) if k in order else len(order), k)):
        program = TRAINERS[key]
        if capability in program.provides:
            found.append(program.trainer)
    return ", ".join(found) or "no registered method"


def unmet_needs(cfg: Any) -> tuple[TrainerSpec, list[tuple[str, str, list[str]]]]:
    """``(trainer record, [(setting, value, [capabilities it lacks]), ...])`` of ``cfg`` (no error raised):
    ``("cache", "inclusion", [...])`` for a stage method, ``("train.batches_ahead", 2, [...])`` for a field its
    config declares in ``field_requires`` and that is set away from its default."""
    program = trainer_class(cfg)
    stages = stage_classes(cfg)
    provided = set(program.provides).union(*(_provides(cls, getattr(cfg, section)) for section, cls in stages.items()))
    unmet = [(section, cfg.method(section), sorted(set(getattr(cls, "requires", ())) - provided))
             for section, cls in stages.items()]
    for section in [*stages, "train"]:   # fields set away from their default that need a capability
        sub = getattr(cfg, section, None)
        needs = getattr(type(sub), "field_requires", {})
        default = type(sub)() if needs else None
        unmet += [(f"{section}.{name}", getattr(sub, name), sorted(set(caps) - provided))
                  for name, caps in needs.items() if getattr(sub, name) != getattr(default, name)]
    return program, [u for u in unmet if u[2]]


def _provides(cls: type, config: Any) -> frozenset:
    """What ``cls`` provides with ``config`` (None: its defaults)."""
    provides_for = getattr(cls, "provides_for", None)
    if provides_for is None:
        return frozenset(getattr(cls, "provides", ()))
    return provides_for(config if config is not None else cls.Config())


def unavailable_methods(cfg: Any) -> list[tuple[str, str, str]]:
    """``[(section, method, why), ...]``: the chosen methods that cannot run here (:meth:`Stage.unavailable
    <workbench.stages.Stage.unavailable>`; partitioners, which are no ``Stage``, always can)."""
    return [(section, cfg.method(section), why) for section, cls in stage_classes(cfg).items()
            if (why := getattr(cls, "unavailable", lambda: None)()) is not None]


def check_composition(cfg: Any) -> TrainerSpec:
    """Refuse ``cfg`` when a chosen stage needs what neither its trainer nor the other stages provide.

    Returns:
        The :class:`TrainerSpec` ``cfg`` trains with (calling it makes the trainer).

    Raises:
        ParamError: one message per stage whose needs are unmet, naming ``SECTION.method``, what the method
            needs and which settings provide it; and one per chosen method that cannot run here
            (:meth:`Stage.unavailable <workbench.stages.Stage.unavailable>`: the ``dgl`` sampler without DGL).
    """
    program, unmet = unmet_needs(cfg)
    errs = ErrorCollector(type(cfg).__name__)
    for section, method, why in unavailable_methods(cfg):   # refused here, not on the rank that would build it
        errs.add(param_error(f"{section}.method", type(cfg).__name__, f"a method whose library imports here: {why}",
                             method))
    program.check_config(cfg, errs)
    if program.default_exchange is not None and getattr(cfg, "exchange", None) is None:
        usable = sorted(n for n, cls in registry("exchange").items() if set(cls.requires) <= set(program.provides))
        errs.add(param_error("exchange.method", type(cfg).__name__, f"one of {usable}: {program.trainer} moves "
                             "embeddings through an exchange", "none"))
    for section, method, lacking in unmet:
        needs = "; and ".join(f"{CAPABILITIES.get(need, need)}, provided by {_providers(need)}" for need in lacking)
        if "." in section:   # a field: its default is what this trainer takes
            sub, _, name = section.partition(".")
            default = getattr(type(getattr(cfg, sub))(), name)
            errs.add(param_error(section, type(cfg).__name__, f"{default!r} with {program.trainer}, which ignores "
                                 f"it: {section} needs {needs}", method))
            continue
        needed = section == "exchange" and program.default_exchange is not None   # it trains through one
        optional = section in ("sample", "cache", "exchange", "schedule") and not needed
        instead = program.instead.get(section)
        errs.add(param_error(f"{section}.method", type(cfg).__name__,
                             f"{'none or ' if optional else ''}a method that {program.trainer} can use: {method!r} "
                             f"needs {needs}" + (f" ({instead})" if instead else ""), method))
    errs.raise_if_any()
    return program


def stage_label(cfg: Any, section: str) -> str:
    """The method of ``section`` as it runs: ``metis+g3`` for a partition refined by ``g3``."""
    name = cfg.method(section)
    refine = getattr(getattr(cfg, section, None), "refine", None)
    return f"{name}+{refine}" if refine and refine != name else name


def stages_summary(cfg: Any) -> dict:
    """What a run summary says of its stages: ``partition`` (refine included) and ``model`` labels, and
    ``stages``, every section with its method and options as the run used them."""
    stages = {k: v for k, v in cfg.to_dict().items() if not k.startswith("_")}
    if not isinstance(stages.get("graph"), (str, type(None))):   # a Graph object given in a notebook
        stages["graph"] = getattr(cfg.graph, "name", "") or type(cfg.graph).__name__
    return {"partition": stage_label(cfg, "partition"), "model": cfg.method("model"), "stages": stages}
