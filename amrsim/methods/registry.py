"""The registry of training methods: one `MethodSpec` per method, in `SPECS` (built-in ones listed once in
`BUILT_IN`; `register` adds another). `METHODS` (name -> Params) and `CARDS` (run kind -> card facts) are built from
it; `amrsim.methods.loaders` builds `TRAINED_LOADERS` and `TRAINED_INPUTS`, `amrsim.stages.train` its `STAGES`."""

from __future__ import annotations

from amrsim.methods import dueam, meaning, mse_amr, pear, s3bert
from amrsim.methods.spec import CardFacts, Derived, MethodSpec
from amrsim.methods.training import MethodParams

__all__ = ["BUILT_IN", "CARDS", "METHODS", "SPECS", "method_spec", "register", "specs"]

BUILT_IN: tuple[MethodSpec, ...] = (s3bert.SPEC, mse_amr.SPEC, dueam.SPEC, pear.SPEC, meaning.SPEC)

SPECS: dict[str, MethodSpec] = {}


def register(spec: MethodSpec) -> MethodSpec:
    """Add `spec`; a name (or run kind) another spec has is refused."""
    taken = {kind for s in SPECS.values() for kind in (s.name, *s.loaders(), *s.cards())}
    clash = sorted({spec.name, *spec.loaders(), *spec.cards()} & taken)
    if clash:
        raise ValueError(f"method {spec.name!r}: {', '.join(clash)} registered already")
    SPECS[spec.name] = spec
    return spec


for _spec in BUILT_IN:
    register(_spec)


def specs() -> tuple[MethodSpec, ...]:
    """The registered specs, in registration order."""
    return tuple(SPECS.values())


def method_spec(name: str) -> MethodSpec:
    """The spec of method `name` (KeyError naming the registered methods)."""
    if name not in SPECS:
        raise KeyError(f"unknown training method '{name}'; available: {', '.join(sorted(SPECS))}")
    return SPECS[name]


# method name -> its Params: what pipelines.yaml's `train:` entries are validated with
METHODS: Derived[type[MethodParams]] = Derived(lambda: {s.name: s.params for s in specs()})
# run kind (a method, or a further kind such as pear_fused) -> what its model card states
CARDS: Derived[CardFacts] = Derived(lambda: {k: c for s in specs() for k, c in s.cards().items()})
