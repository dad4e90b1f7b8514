"""A training method's one declaration, `MethodSpec`: its name, `Params`, core train entry, trained-model loader,
extra vector inputs, card facts and (for a method outside `amrsim`) its pipeline stage. `amrsim.methods.registry`
holds the specs; every table of methods is built from them. Loads no torch."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from amrsim.encoders import TrainedLoader, TrainedModel
from amrsim.methods.training import MethodParams

if TYPE_CHECKING:
    import polars as pl

__all__ = ["CardFacts", "Derived", "MethodSpec", "RunKind", "Stage", "TrainedInputs"]

V = TypeVar("V")


@dataclass(frozen=True)
class CardFacts:
    """What a run's model card states about its method."""

    title: str
    paper: str
    summary: str
    pipeline_tag: str
    tags: tuple[str, ...]
    command: str  # how a run of the method is made


class TrainedInputs(Protocol):
    """What a trained run's vector of each sentence of `frame` (key, text) depends on besides the run and the text,
    one string per row, found without loading the model: a run that reads more than the text (MSE-AMR: a graph)."""

    def __call__(self, model: TrainedModel, wh: Any, dataset: str, frame: pl.DataFrame,
                 translate: dict[str, Any] | None = None) -> list[str]: ...


class Stage(Protocol):
    """A method's training in the pipeline (the application layer): reads the pinned tables, calls the core, writes
    `warehouse/models/<method>/<run_id>/`; returns the stage summary."""

    def __call__(self, pipe: Any, params: Any, run_id: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RunKind:
    """A further kind of run a method writes beside its own (PEAR's `pear_fused`): loaded as `<name>:<run id>`."""

    name: str
    loader: TrainedLoader
    card: CardFacts


@dataclass(frozen=True)
class MethodSpec:
    """One training method, declared once in `amrsim/methods/<name>/__init__.py`. `loader` is None where a run is a
    plain sentence-transformers directory; `inputs`, what its vectors read besides the text (part of their embedding
    keys); `stage` is None for a method inside `amrsim`: its stage lives in `amrsim/stages/train/<name>.py`, above
    this layer, and is listed there (`amrsim.stages.train.LAYER_STAGES`)."""

    name: str
    params: type[MethodParams]
    train: Callable[..., Any]
    card: CardFacts
    loader: TrainedLoader | None = None
    inputs: TrainedInputs | None = None
    kinds: tuple[RunKind, ...] = ()
    stage: Stage | None = None

    @property
    def defaults(self) -> dict[str, Any]:
        """The params' default values (from the params model; required ones left out)."""
        return {k: f.get_default(call_default_factory=True) for k, f in self.params.model_fields.items()
                if not f.is_required()}

    def loaders(self) -> dict[str, TrainedLoader]:
        """Run kind -> its loader: the method's own (if any), then each further kind's."""
        own = {self.name: self.loader} if self.loader is not None else {}
        return own | {k.name: k.loader for k in self.kinds}

    def cards(self) -> dict[str, CardFacts]:
        """Run kind -> what its card states."""
        return {self.name: self.card} | {k.name: k.card for k in self.kinds}


class Derived(Mapping[str, V]):
    """A read-only table built from the registered specs each time it is read: it follows every registration."""

    def __init__(self, build: Callable[[], dict[str, V]]) -> None:
        self._build = build

    def __getitem__(self, key: str) -> V:
        return self._build()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._build())

    def __len__(self) -> int:
        return len(self._build())

    def __repr__(self) -> str:
        return repr(self._build())
