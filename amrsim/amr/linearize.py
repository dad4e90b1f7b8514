"""AMR graphs as token sequences for a text encoder (MSE-AMR, Cai et al. 2022, §4.1), and the AMR vocabulary to add.

A sentence encoder reads a graph as text, so the graph is written depth-first from the root as it is laid out in
its PENMAN string (the surface tree, not a re-layout), one space between tokens:

* ``(`` and ``)`` mark depth; every node is written as its concept, variables are removed;
* roles are tokens (``:ARG0``); an inverse role is split as the released MSE-AMR code does: ``:ARG0-of`` is
  written ``:ARG0 -of`` (so the relation vocabulary holds ``:ARG0`` once for both directions);
* ``:wiki`` edges are dropped (their values are Wikipedia titles, noise for similarity);
* constants are kept: ``-`` (polarity), numbers, ``imperative``...; quoted strings lose their quotes and
  ``_`` becomes a space, as in the released code (``"New_York"`` -> ``New York``);
* a node reached again (a reentrancy) is written again as its bare concept, without parentheses or its subtree.

Variants (``variant=``):

``"paper"``
    What the paper trains on, and what the released MSE-AMR code (``amr/IO.py``, ``_get_nodes`` with
    ``use_pointer_tokens=True``) actually emits: despite the flag's name, it maps each variable to its *concept*
    (``remapv2``), never to a pointer token. ``(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))`` ->
    ``( want-01 :ARG0 ( boy ) :ARG1 ( go-02 :ARG0 boy ) )``: the reentrant ``boy`` has no parentheses, which
    tells it from a new node.
``"pointer"``
    SPRING's linearisation (Bevilacqua et al. 2021), the code MSE-AMR's was copied from: variables become
    ``<pointer:N>``, N numbering nodes in the order they are defined; a node's definition is
    ``( <pointer:N> concept ... )`` and every other mention is ``<pointer:N>`` alone ->
    ``( <pointer:0> want-01 :ARG0 ( <pointer:1> boy ) :ARG1 ( <pointer:2> go-02 :ARG0 <pointer:1> ) )``.
    Same token conventions otherwise (SPRING's own tokenizer also wraps strings in ``<lit> </lit>``; not done here).

Not done here (tokenizer-side in the released code, and vocabulary-dependent): splitting a frame missing from the
added vocabulary into ``want -01``. `vocabulary` chooses which relation and frame tokens become whole tokens.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

import penman

from amrsim.amr.graph import AMRError, parse

__all__ = ["VARIANTS", "is_frame", "is_relation", "linearize", "vocabulary"]

VARIANTS = ("paper", "pointer")
_FRAME = re.compile(r"^[a-z][a-z0-9-]*-\d\d$")  # want-01, have-rel-role-91 (strings/numbers never match)
_RELATION = re.compile(r"^:[A-Za-z][\w-]*$")


def is_frame(token: str) -> bool:
    return _FRAME.match(token) is not None


def is_relation(token: str) -> bool:
    return _RELATION.match(token) is not None


def _role_tokens(role: str) -> list[str]:
    if role.endswith("-of") and len(role) > 4:
        return [role[:-3], "-of"]
    return [role]


def _constant_tokens(value: str) -> list[str]:
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        return value[1:-1].replace("_", " ").split() or ['""']  # an empty string stays visible
    return [value]


def linearize(penman_text: str, variant: str = "paper") -> str:
    """One PENMAN graph (``# ::`` metadata allowed) as a space-separated token string; AMRError if invalid."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown linearization variant '{variant}': use {' or '.join(VARIANTS)}")
    graph = parse(penman_text)  # validates; raises AMRError
    try:
        tree = penman.configure(graph)  # the layout as written (parse keeps penman's epigraph)
    except Exception as e:  # penman raises several error types on odd graphs
        raise AMRError(f"cannot lay out graph: {e}") from e

    concepts: dict[str, str] = {}
    pointers: dict[str, str] = {}
    for var, branches in tree.nodes():  # definition order = depth-first order of the surface tree
        concepts[var] = next((str(t) for r, t in branches if r == "/"), "")
        pointers[var] = f"<pointer:{len(pointers)}>"

    out: list[str] = []

    def walk(node: tuple) -> None:
        var, branches = node
        out.append("(")
        if variant == "pointer":
            out.append(pointers[var])
        out.append(concepts[var])
        for role, target in branches:
            if role == "/" or role == ":wiki":
                continue
            out.extend(_role_tokens(role))
            if isinstance(target, tuple):
                walk(target)
            elif target in concepts:  # a reentrancy: a variable written again
                out.append(pointers[target] if variant == "pointer" else concepts[target])
            else:
                out.extend(_constant_tokens(str(target)))
        out.append(")")

    walk(tree.node)
    return " ".join(out)


def vocabulary(linearized: Iterable[str], min_count: int = 5) -> dict[str, int]:
    """Relation (``:ARG0``) and frame (``want-01``) tokens seen at least `min_count` times in linearized graphs,
    with their counts, by count descending then token: the tokens to add whole to the encoder's vocabulary."""
    counts: Counter[str] = Counter()
    for line in linearized:
        if line:
            counts.update(t for t in line.split() if is_relation(t) or is_frame(t))
    kept = [(t, c) for t, c in counts.items() if c >= min_count]
    kept.sort(key=lambda tc: (-tc[1], tc[0]))
    return dict(kept)
