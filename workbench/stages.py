"""Stage kinds and their registries: the one pattern every swappable stage follows.

A run is a composition of stages (partition, sample, cache, exchange, model, ...). Each stage *kind* has
one :class:`Registry`; each *method* of a kind is a small :class:`Stage` subclass with a nested,
validated ``Config`` and a ``name``, added with the registry's decorator::

    from workbench.stages import Stage, registry

    SAMPLERS = registry("sample")

    @SAMPLERS.register
    class MySampler(Stage):
        kind = "sample"
        name = "mine"

        @dataclasses.dataclass(kw_only=True)
        class Config(Stage.Config):
            fanouts: tuple[int, ...] = (10, 5)
            \"\"\"Neighbours per layer.\"\"\"

A new method is that class plus its registration: the CLI (``--set sample.method=mine``), the dashboard
form and ``--help`` listings read the registries, so nothing else needs an edit.

Example:
    >>> import dataclasses
    >>> demo = Registry("demo")
    >>> @demo.register
    ... class Plain(Stage):
    ...     kind = "demo"
    ...     name = "plain"
    ...     @dataclasses.dataclass(kw_only=True)
    ...     class Config(Stage.Config):
    ...         width: int = 2
    ...         \"\"\"How wide.\"\"\"
    >>> demo.build("plain", width=3).config.width
    3
    >>> demo.build("fancy")
    Traceback (most recent call last):
    ...
    workbench._validation.ParamError: The 'method' parameter of demo must be one of ['plain']. Got 'fancy' instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Optional

from workbench._validation import Config as BaseConfig
from workbench._validation import ParamError, check_choice
from workbench.constraints import declared

__all__ = ["Stage", "Registry", "registry", "REGISTRIES", "STAGE_SECTIONS", "resolve_config", "switch_config"]

STAGE_SECTIONS: dict[str, str] = {"partition": "partition", "sample": "sample", "cache": "cache",
                                  "exchange": "exchange", "model": "model", "schedule": "schedule",
                                  "sync": "sync", "loss": "loss",
                                  "evaluate": "evaluate", "step": "step"}
"""Section of a run config (:class:`workbench.compose.RunConfig`) -> stage kind (its registry)."""


class Stage:
    """Base of a stage method: ``kind`` (the stage kind), ``name`` (its registry name), a nested ``Config``.

    Build it with a config or with the config's fields as keywords (unknown names list the valid ones).
    """

    kind: ClassVar[str] = ""
    """The stage kind (``sample``, ``cache``, ...): the registry it belongs to."""
    name: ClassVar[str] = ""
    """The method's registry name (``--set KIND.method=NAME``)."""
    requires: ClassVar[frozenset[str]] = frozenset()
    """What this method needs from the run: capabilities that the trainer or another stage provides
    (``workbench.compose.CAPABILITIES``). :meth:`RunConfig.check_composition
    <workbench.compose.RunConfig.check_composition>` refuses a run that lacks one, before any worker starts."""
    provides: ClassVar[frozenset[str]] = frozenset()
    """Capabilities this method gives the rest of the run (an edge sampler's inclusion probabilities)."""

    @classmethod
    def provides_for(cls, config: Any) -> frozenset[str]:
        """What this method provides with ``config`` (its options may add or withhold a capability: ``halo``
        sends fresh point-to-point halo rows only without staleness). Default: :attr:`provides`."""
        return cls.provides

    @classmethod
    def unavailable(cls) -> Optional[str]:
        """Why this method cannot run here (a library it wraps does not import), or None when it can.
        :func:`~workbench.composition.check_composition` refuses a run that chooses it, before any worker starts,
        instead of the rank that would build it."""
        return None

    @dataclasses.dataclass(kw_only=True)
    class Config(BaseConfig):
        """The method's options (attribute docstrings become ``--help`` and form tooltips)."""

    def __init__(self, config: Optional["Stage.Config"] = None, **options: Any):
        self.config = resolve_config(self, config, options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


def resolve_config(stage: Any, config: Any, options: dict) -> Any:
    """``stage``'s validated config: ``config`` (with ``options`` applied) or ``stage.Config(**options)``.

    Unknown option names and a config of another class are one :class:`ParamError` each."""
    if config is None:
        stage.Config._check_names(options)
        config = stage.Config(**options)
    elif options:
        config = config.replace(**options)
    if not isinstance(config, stage.Config):
        raise ParamError([f"The 'config' parameter of {type(stage).__name__} must be a "
                          f"{type(stage).__name__}.Config. Got {type(config).__name__} instead."])
    return config


def switch_config(current: Any, cls: type) -> Any:
    """A ``cls`` config keeping the fields ``current`` (a config of another method, or None) shares with it
    where ``cls`` accepts the value: what switching a section's method keeps (``--set partition.method=metis``
    keeps ``seed``). A shared name whose value the new method declares invalid (the hypergraph partitioner's
    ``objective='km1'``, which METIS does not offer) takes the new method's default: it is another option that
    happens to share the name, not a setting the user gave the new method. Kept values that the new method's config
    refuses together (the ``whole_part`` step's unlimited ``memory_budget`` under ``binned`` with no vertex cap) are
    kept only where the user changed them from the old method's default."""
    shared = type(current).field_names() if current is not None else ()
    constraints = declared(cls)
    keep = {f: getattr(current, f) for f in cls.field_names() if f in shared}
    keep = {f: v for f, v in keep.items() if f not in constraints or constraints[f].check(v)}
    try:
        return cls(**keep)
    except ParamError:
        if not keep:
            raise
        old = type(current)()
        return cls(**{f: v for f, v in keep.items() if v != getattr(old, f)})


class Registry(dict):
    """The registered methods of one stage kind, by name (a ``dict`` of name -> class)."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, cls: type) -> type:
        """Class decorator: add ``cls`` under ``cls.name``."""
        if not getattr(cls, "name", ""):
            raise ValueError(f"{cls.__name__} needs a name to be registered as a {self.kind} method")
        self[cls.name] = cls
        return cls

    def get_class(self, name: str) -> type:
        """The class registered as ``name``; the error lists the valid names."""
        check_choice(name, "method", self.kind, sorted(self))
        return self[name]

    def config_class(self, name: str) -> type:
        """The ``Config`` class of the method ``name``."""
        return self.get_class(name).Config

    def build(self, name: str, config: Optional[BaseConfig] = None, **options: Any) -> Any:
        """An instance of the method ``name`` with ``config`` or keyword options."""
        return self.get_class(name)(config, **options)

    def name_of(self, config: Any) -> Optional[str]:
        """The method whose ``Config`` class ``config`` is an instance of (exact class), or ``None``."""
        for name, cls in self.items():
            if type(config) is cls.Config:
                return name
        return None

    def describe(self) -> dict[str, dict[str, str]]:
        """``{method: {field: help}}``: what ``--help`` listings and the dashboard form show."""
        return {name: dict(cls.Config.field_docs()) for name, cls in sorted(self.items())}

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, methods={sorted(self)})"


REGISTRIES: dict[str, Registry] = {}
"""Every stage kind's registry, by kind."""


def registry(kind: str) -> Registry:
    """The registry of stage kind ``kind`` (created on first use; one per kind)."""
    if kind not in REGISTRIES:
        REGISTRIES[kind] = Registry(kind)
    return REGISTRIES[kind]
