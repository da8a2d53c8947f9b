"""The run form: widgets from config fields; invalid settings refused with the reason, never a traceback."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Optional

import panel as pn
import pytest

from widgets.control import RunControl, config_widgets, discover_recipes
from workbench._validation import Config, ErrorCollector
from workbench.constraints import Interval, Options


@dataclasses.dataclass(kw_only=True)
class DemoConfig(Config):
    graph: str = "karate"
    """Graph spec."""
    num_parts: Optional[int] = None
    """Number of parts."""
    model: Annotated[str, Options("gcn", "sage")] = "gcn"
    """``gcn`` or ``sage``."""
    epochs: int = 3
    """Training epochs."""
    lr: float = 0.01
    """Learning rate."""
    pin: bool = False
    """Pin inputs."""

    def _validate(self, errs: ErrorCollector) -> None:
        errs.check(self.epochs >= 1, "epochs", "an int in [1, inf]", self.epochs)


def _form(launched):
    def launcher(cfg, **kw):
        launched.append((cfg, kw))
        return type("H", (), {"run_id": "h1", "stop": lambda self: None})()

    return RunControl(recipes={"demo": DemoConfig}, launcher=launcher)


def test_widgets_follow_field_types_and_docs():
    ws = config_widgets(DemoConfig())
    assert isinstance(ws["epochs"], pn.widgets.IntInput) and ws["epochs"].description == "Training epochs."
    assert isinstance(ws["lr"], pn.widgets.FloatInput)
    assert isinstance(ws["pin"], pn.widgets.Checkbox)
    assert isinstance(ws["model"], pn.widgets.Select) and ws["model"].options == ["gcn", "sage"]
    assert isinstance(ws["num_parts"], pn.widgets.TextInput) and ws["num_parts"].value == ""


def test_widgets_take_choices_and_ranges_from_declared_constraints():
    from widgets.control import section_widgets
    from workbench.compose import RunConfig

    @dataclasses.dataclass(kw_only=True)
    class Ranged(Config):
        ratio: Annotated[float, Interval(0, 1)] = 0.5
        """A fraction."""
        count: Annotated[int, Interval(0, 10, closed="neither")] = 3
        """Open ends: the input's ends move in."""

    ws = config_widgets(Ranged())
    assert (ws["ratio"].start, ws["ratio"].end, ws["count"].start, ws["count"].end) == (0, 1, 1, 9)
    cfg = RunConfig.compose(graph="karate").with_strings({"partition.method": "random"})
    ws = {**section_widgets(cfg, "model"), **section_widgets(cfg, "train"), **section_widgets(cfg, "partition")}
    assert (ws["model.num_layers"].start, ws["model.num_layers"].end) == (1, 4)
    assert isinstance(ws["train.optimizer"], pn.widgets.Select) and ws["train.optimizer"].options == ["adam", "sgd"]
    assert ws["partition.refine"].options == ["none", "g3"] and ws["partition.refine"].value == "none"
    ws = section_widgets(cfg.with_strings({"step.method": "binned"}), "step")
    assert isinstance(ws["step.memory_budget"], pn.widgets.TextInput)    # None, 'auto' or any int: typed


def test_start_launches_with_form_values():
    launched = []
    form = _form(launched)
    form.widgets["epochs"].value = 7
    form.workers.value = 3
    form.start(wait=True)
    (cfg, kw), = launched
    assert cfg.epochs == 7 and kw["workers"] == 3 and kw["recipe"] == "demo"
    assert form.message.alert_type == "success" and "h1" in form.message.object


def test_the_workers_box_shows_what_fixes_the_ranks():
    """``num_parts`` or the single runner fix the ranks: the box shows that count, disabled, and the launcher gets
    ``workers=None`` (a count the run would ignore is refused by ``launch``); cleared, the box is the user's again."""
    launched = []
    form = _form(launched)
    form.workers.value = 3
    form.widgets["num_parts"].value = "2"
    assert (form.workers.value, form.workers.disabled) == (2, True)
    form.start(wait=True)
    form.runner.value = "single"
    assert (form.workers.value, form.workers.disabled) == (1, True)
    form.start(wait=True)
    form.runner.value = "local"
    form.widgets["num_parts"].value = ""
    assert (form.workers.value, form.workers.disabled) == (3, False)
    form.start(wait=True)
    assert [(cfg.num_parts, kw["runner"], kw["workers"]) for cfg, kw in launched] == \
        [(2, "local", None), (2, "single", None), (None, "local", 3)]


@pytest.mark.parametrize("field,value,expect", [
    ("epochs", 0, "'epochs' parameter of DemoConfig"),
    ("num_parts", "two", "'num_parts' parameter"),
])
def test_invalid_settings_are_refused_in_the_form(field, value, expect):
    launched = []
    form = _form(launched)
    form.widgets[field].value = value
    assert form.start() is None
    assert not launched
    assert form.message.visible and form.message.alert_type == "danger" and expect in form.message.object
    assert "Traceback" not in form.message.object


def test_launcher_errors_are_shown():
    def launcher(cfg, **kw):
        raise FileNotFoundError("graph file 'nope.txt' does not exist")

    form = RunControl(recipes={"demo": DemoConfig}, launcher=launcher)
    form.start(wait=True)
    assert "nope.txt" in form.message.object and form.message.alert_type == "danger"
    assert not form.start_button.disabled


def test_recipes_are_discovered_by_run_name():
    recipes = discover_recipes()
    assert {"full_graph", "sancus"} <= set(recipes)
    assert all(isinstance(fn(), Config) for fn in recipes.values())


@pytest.mark.parametrize("graph,num_parts,expect", [
    ("karate", "50", "num_parts"),             # more parts than vertices
    ("{tmp}/bad.txt", "2", "bad.txt"),         # a graph file that does not parse
])
def test_real_recipe_refuses_bad_runs(tmp_path, graph, num_parts, expect):
    pytest.importorskip("workbench.runtime.launch")
    from widgets.app import default_launcher

    (tmp_path / "bad.txt").write_text("0 1\nthis is not an edge\n")
    form = RunControl(launcher=lambda cfg, **kw: default_launcher(cfg, out=tmp_path / "runs", **kw),
                      default_recipe="full_graph")
    form.widgets["graph"].value = graph.format(tmp=tmp_path)
    form.widgets["num_parts"].value = num_parts
    form.widgets["train.epochs"].value = 1
    form.runner.value = "local"
    form.start(wait=True)
    assert form.message.alert_type == "danger", form.message.object
    assert expect in form.message.object and "Traceback" not in form.message.object


def test_unknown_recipe_option_is_refused():
    form = _form([])
    form.widgets["bogus"] = pn.widgets.TextInput(value="1")
    form.start()
    assert "no option 'bogus'" in form.message.object


def test_form_fanouts_set_the_layers_as_on_the_command_line():
    """The form sends what the user changed, so fan-outs alone set the layer count, as on the command line."""
    launched = []
    form = RunControl(launcher=lambda cfg, **kw: launched.append(cfg), default_recipe="distdgl")
    form.widgets["sample.fanouts"].value = "5,5"
    cfg = form.config()
    assert cfg.model.num_layers == 2 and cfg.notes() == ["model.num_layers=2 (from sample.fanouts)"]
    form.widgets["model.num_layers"].value = 4                          # both changed, disagreeing: refused
    form.start(wait=True)
    assert not launched and form.message.alert_type == "danger"
    assert "sample.fanouts" in form.message.object and "model.num_layers=4" in form.message.object
