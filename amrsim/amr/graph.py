"""AMR graphs over `penman`, and the triples Smatch compares.

`parse` validates a PENMAN string with a small tokenizer (clear `AMRError`s: unbalanced parentheses, duplicate or
undefined variables, empty input) and returns the `penman.Graph`; `smatch_triples` turns a graph (or a string, the
fast path that skips penman) into the instance / attribute / relation triples Smatch aligns. Both first try the C
reader (`_penman_reader.c`: one pass, the same graph penman builds; from a string, `read_smatch` builds the Smatch
triples too, by `surface_triples`' rules); a text it does not handle (alignments, escapes, odd whitespace, any
error) takes the Python tokenizer and penman, so errors are the same either way.

Conventions (`convention=`):

* ``"smatch"`` -- exactly the triples of smatch 1.0.4 (`amr.py` parse_AMR_line): roles written ``:X-of`` are
  inverted except ``consist-of``, ``prep-on-behalf-of``, ``prep-out-of`` (case-sensitive, as the reference); a
  written ``:mod`` becomes ``domain`` in the other direction; inverted or ``:mod`` edges to a *constant* are dropped
  (the reference files them under the constant and never reads them); a quoted constant keeps only its first
  whitespace-separated word (the reference drops spaces); the TOP triple is ``(root, "TOP", "top")``; ``:X-of-of``
  loses one ``-of`` (``(b, X-of, a)``).
* ``"amr"`` -- the same inversions and ``mod``->``domain`` rewrite, applied to a ``:mod-of`` too (it is ``:mod``
  turned around: penman and smatchpp read both spellings as one graph), but whole quoted strings, edges to constants
  kept, a TOP triple that keeps the root concept ``(root, "TOP", concept)``, as smatchpp's AMR standardiser and
  BAMBOO's published Smatch row do, and an even number of ``-of`` cancelling (``:X-of-of`` is ``:X``), as
  smatchpp. Measured Pearson x100 on BAMBOO main test (sts / sick / para): 58.42 / 59.70 / 41.31 (published 58.39 /
  59.75 / 41.32); without the ``mod`` rewrite 58.52 / 59.70 / 41.34; truncating quoted strings as smatch does changes
  nothing measurable.

Concepts and constants are stored lower-cased without quotes (what smatch compares); roles keep their spelling
without the colon (the scorer compares them lower-cased). Duplicated triples are kept: the reference counts them.
Alignments (``~e.3``, glued to a label or not) are dropped in both conventions, as penman does (smatch 1.0.4 keeps a
glued one as part of the label: ``alpha~e.1`` is not ``alpha`` there).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal

import penman
from penman.layout import POP, Push
from penman.models.amr import model

from amrsim.amr import _penman_reader

# parse_python, read_surface, surface_of and surface_triples are the pure-Python readings the C reader must equal
__all__ = ["AMRError", "SmatchTriples", "Surface", "parse", "parse_python", "read_surface", "read_triples",
           "smatch_triples", "structure_triples", "surface_edges", "surface_of", "surface_triples", "unquoted"]

logging.getLogger("penman").setLevel(logging.ERROR)  # penman warns on every duplicated triple

INVERSION_EXCEPTIONS = frozenset({"prep-on-behalf-of", "prep-out-of", "consist-of"})
# an alignment (``~e.3``, ``~1,2``) is a token of its own, as in penman's lexer, glued to its label or not
_ALIGNMENT = r"~(?:[a-z]\.?)?\d+(?:,\d+)*"
# whitespace is penman's (space, tab, CR, LF, VT, FF): a no-break space is part of a symbol, as penman reads it
_TOKEN = re.compile(
    r'[ \t\r\n\v\f]+|"(?:[^"\\]|\\.)*"|[()/]|' + _ALIGNMENT
    + r'|:[^ \t\r\n\v\f()"/:~]*|[^ \t\r\n\v\f()"/:~]+(?::[^ \t\r\n\v\f()"/:~]+)*|"|~')
_IS_ALIGNMENT = re.compile(_ALIGNMENT + "$")
_VARIABLE_LIKE = re.compile(r"^[a-z]{1,3}\d*$|^[a-z]+\d+$")
_CONSTANT_WORDS = frozenset({"imperative", "expressive", "interrogative"})


class AMRError(ValueError):
    """A string that is not a well-formed AMR; the message says what is wrong."""


@dataclass(frozen=True)
class SmatchTriples:
    """The triples Smatch aligns, with variables in order of appearance (the first is the root)."""

    variables: tuple[str, ...]
    instances: tuple[tuple[str, str], ...]
    attributes: tuple[tuple[str, str, str], ...]
    relations: tuple[tuple[str, str, str], ...]

    def __len__(self) -> int:
        return len(self.instances) + len(self.attributes) + len(self.relations)


@dataclass(frozen=True)
class Surface:
    """A graph as written: nodes in order, and each edge as (source, role, target, target-is-constant)."""

    variables: tuple[str, ...]
    concepts: tuple[str, ...]
    edges: tuple[tuple[str, str, str, bool], ...]


def _strip_metadata(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def read_surface(text: str) -> Surface:
    """Tokenize and check one PENMAN graph; raise AMRError naming the problem."""
    if not isinstance(text, str):
        raise AMRError(f"expected a string, got {type(text).__name__}")
    if not text.strip():
        raise AMRError("empty graph")
    body = _strip_metadata(text)
    if not body.strip():
        raise AMRError("only metadata, no graph")
    # alignments are annotation, not meaning: dropped, as penman keeps them out of the triples (a stray '~' is kept,
    # and refused below)
    tokens = [t for t in _TOKEN.findall(body) if t.strip(" \t\r\n\v\f") and not _IS_ALIGNMENT.match(t)]
    variables: list[str] = []
    concepts: list[str] = []
    defined: set[str] = set()
    edges: list[tuple[str, str, str, bool]] = []
    stack: list[str] = []
    pos, n = 0, len(tokens)
    if n == 0 or tokens[0] != "(":
        raise AMRError(f"graph must start with '(' (got {tokens[0]!r})" if n else "empty graph")
    pending_role: str | None = None
    while pos < n:
        tok = tokens[pos]
        if tok == "(":
            if stack and pending_role is None:
                raise AMRError("'(' without a role before it")
            if not stack and variables:
                raise AMRError("more than one graph (content after the root closed)")
            if pos + 1 >= n or tokens[pos + 1] in "()/" or tokens[pos + 1].startswith(":"):
                raise AMRError("unbalanced parentheses" if pos + 1 >= n else "missing variable after '('")
            var = tokens[pos + 1]
            if var in defined:
                raise AMRError(f"duplicate variable {var}")
            if pos + 2 >= n or tokens[pos + 2] != "/":
                raise AMRError(f"missing concept for variable {var}")
            if pos + 3 >= n or tokens[pos + 3] in "()/" or tokens[pos + 3].startswith(":"):
                raise AMRError(f"missing concept for variable {var}")
            defined.add(var)
            variables.append(var)
            concepts.append(tokens[pos + 3])
            if stack:
                edges.append((stack[-1], pending_role, var, False))  # type: ignore[arg-type]
            pending_role = None
            stack.append(var)
            pos += 4
        elif tok == ")":
            if not stack:
                raise AMRError("unbalanced parentheses")
            if pending_role is not None:
                raise AMRError(f"role :{pending_role} has no value")
            stack.pop()
            pos += 1
        elif tok.startswith(":"):
            if not stack:
                raise AMRError("unbalanced parentheses" if variables else "role outside a node")
            if pending_role is not None:
                raise AMRError(f"role :{pending_role} has no value")
            pending_role = tok[1:]
            if not pending_role:
                raise AMRError("empty role ':'")
            pos += 1
        elif tok == "/":
            raise AMRError("unexpected '/'")
        elif tok == '"':
            raise AMRError("unterminated quote")
        elif tok == "~":  # not an alignment: penman's own message says where
            try:
                penman.decode(text)
            except Exception as e:
                raise AMRError(f"penman could not read the graph: {e}") from e
            raise AMRError("'~' that is not an alignment (~e.N)")
        else:  # a constant or a variable reference
            if pending_role is None or not stack:
                raise AMRError(f"unexpected token {tok!r}")
            edges.append((stack[-1], pending_role, tok, tok.startswith('"')))
            pending_role = None
            pos += 1
    if stack:
        raise AMRError("unbalanced parentheses")
    resolved = []
    for src, role, tgt, quoted in edges:
        if quoted or tgt in defined:
            resolved.append((src, role, tgt, quoted))
        elif _VARIABLE_LIKE.match(tgt) and tgt not in _CONSTANT_WORDS and role not in ("mode", "polarity", "li"):
            raise AMRError(f"undefined variable {tgt}")
        else:
            resolved.append((src, role, tgt, True))
    return Surface(tuple(variables), tuple(concepts), tuple(resolved))


def _surface_from_penman(graph: penman.Graph) -> Surface:
    """Surface edges of a graph not made by `parse`: re-layout with penman (inverted roles come back as written)."""
    try:
        tree = penman.configure(graph)
    except Exception as e:  # penman raises several error types on odd graphs
        raise AMRError(f"cannot lay out graph: {e}") from e
    variables: list[str] = []
    concepts: list[str] = []
    edges: list[tuple[str, str, str, bool]] = []
    defined = set(graph.variables())
    triples = set(graph.triples)

    def written_role(var: str, role: str, child: str) -> str:
        """The role as the text wrote it. The layout writes a triple (child, R, var) under var as `invert(R)`, which
        for R = ``:X-of`` is ``:X``: that would read back as (var, X, child), not the triple. It was written
        ``:X-of-of``, which `surface_triples` turns into (child, X-of, var), as from text."""
        if (var, role, child) in triples or role.endswith("-of"):
            return role[1:]
        if (child, role + "-of", var) in triples:
            return role[1:] + "-of-of"
        return role[1:]

    def walk(node) -> None:
        var, branches = node
        variables.append(var)
        concept = next((t for r, t in branches if r == "/"), None)
        concepts.append("" if concept is None else str(concept))
        for role, tgt in branches:
            if role == "/":
                continue
            if isinstance(tgt, tuple):
                edges.append((var, written_role(var, role, tgt[0]), tgt[0], False))
                walk(tgt)
            else:
                edges.append((var, role[1:], str(tgt), str(tgt) not in defined))

    walk(tree.node)
    return Surface(tuple(variables), tuple(concepts), tuple(edges))


def _penman_metadata(comments: list[str]) -> dict[str, str]:
    """Metadata of the comment lines before a graph, read as penman does (``# ::key value ::key2 value2``)."""
    metadata = {}
    for comment in comments:
        while comment:
            comment, found, meta = comment.rpartition("::")
            if found:
                key, _, value = meta.partition(" ")
                metadata[key] = value.rstrip()
    return metadata


def _read_fast(text: str) -> penman.Graph | None:
    """The C reader's graph (penman's triples, epigraph and metadata, plus the surface), or None where the text
    needs the Python path (anything unusual, every error)."""
    read = _penman_reader.read(text, Push, POP, True)
    if read is None:
        return None
    variables, concepts, edges, triples, epidata, comments = read
    graph = penman.Graph(triples, top=variables[0], epidata=epidata,
                         metadata=_penman_metadata(comments) if comments else None)
    graph._amrsim_surface = Surface(variables, concepts, edges)
    return graph


def parse(text: str) -> penman.Graph:
    """Parse one PENMAN graph (``# ::`` metadata lines allowed); raises AMRError, never anything else."""
    graph = _read_fast(text)
    return graph if graph is not None else parse_python(text)


def parse_python(text: str) -> penman.Graph:
    """`parse` by the Python tokenizer and penman: the path for what the C reader leaves, and the reference."""
    surface = read_surface(text)
    try:
        graph = penman.decode(text)
    except Exception as e:  # penman's DecodeError and friends
        raise AMRError(f"penman could not read the graph: {e}") from e
    if not graph.triples:
        raise AMRError("empty graph")
    graph._amrsim_surface = surface  # exact surface roles for smatch_triples (penman loses duplicated edges' layout)
    return graph


def read_triples(text: str, convention: Literal["smatch", "amr"] = "amr", dereify: bool = False) -> SmatchTriples:
    """`smatch_triples(parse(text), convention, dereify)` without building the penman.Graph where the C reader takes
    the text (not dereified); otherwise exactly that call, so errors are the same."""
    if convention not in ("smatch", "amr"):
        raise ValueError(f"convention must be 'smatch' or 'amr', not {convention!r}")
    if dereify:
        return smatch_triples(parse(text), convention, dereify=True)
    read = _penman_reader.read_smatch(text, Push, POP, 2, convention == "smatch")  # what `parse` reads in C
    if read is None:
        return smatch_triples(parse(text), convention)
    return SmatchTriples(*read)


def surface_edges(graph: penman.Graph | str) -> tuple[tuple[str, str, str, bool], ...]:
    """Edges as written: (source, role without colon, target, target-is-constant)."""
    return surface_of(graph).edges


def surface_of(graph: penman.Graph | str) -> Surface:
    if isinstance(graph, str):
        read = _penman_reader.read(graph, Push, POP, False)
        return read_surface(graph) if read is None else Surface(*read)
    surface = getattr(graph, "_amrsim_surface", None)
    return surface if surface is not None else _surface_from_penman(graph)


def _normalize(item: str) -> str:
    """What smatch compares: lower-cased, trailing '_' (its quote marker) removed."""
    return item.lower().rstrip("_")


def unquoted(value: str) -> str:
    """A label without the quotes of a PENMAN string (``"William"`` -> ``William``); any other label as it is."""
    return value[1:-1] if len(value) >= 2 and value[0] == '"' and value[-1] == '"' else value


def _concept(concept: str) -> str:
    """A concept as smatch compares it: a quoted concept (``(x / "foo")``) without its quotes, as smatch 1.0.4."""
    return _normalize(unquoted(concept))


def _constant(value: str, quoted: bool, convention: str) -> str:
    if not quoted:
        return _normalize(value)
    content = unquoted(value)
    if convention == "smatch":  # the reference drops spaces and keeps the first word, then '_' marks the quote
        return _normalize((content + "_").split()[0])
    return content.lower()


def smatch_triples(graph: penman.Graph | str, convention: Literal["smatch", "amr"] = "amr",
                   dereify: bool = False) -> SmatchTriples:
    """Instance, attribute and relation triples of a graph under a Smatch convention (see the module docstring).

    dereify=True first collapses reified nodes (penman's AMR model table, e.g. ``have-mod-91`` with ``:ARG1 x
    :ARG2 y`` -> ``(x, mod, y)``) when the node has exactly those two edges, nothing else, and is not the root.
    """
    if convention not in ("smatch", "amr"):
        raise ValueError(f"convention must be 'smatch' or 'amr', not {convention!r}")
    if isinstance(graph, str) and not dereify:  # the C reader's triples (`surface_triples`' rules in C) where it can
        read = _penman_reader.read_smatch(graph, Push, POP, 0, convention == "smatch")
        if read is not None:
            return SmatchTriples(*read)
    return surface_triples(surface_of(graph), convention, dereify)


def structure_triples(graph: penman.Graph | str, convention: Literal["smatch", "amr"] = "amr",
                      dereify: bool = False) -> SmatchTriples:
    """`smatch_triples` without the ``:mod`` -> reversed ``domain`` rewrite: the edges point as the graph means them,
    for the aspects that read its shape (reentrancies, degrees, unlabeled edges), as amr-evaluation reads them."""
    return surface_triples(surface_of(graph), convention, dereify, mod_as_domain=False)


def surface_triples(s: Surface, convention: str, dereify: bool = False, mod_as_domain: bool = True) -> SmatchTriples:
    """The Smatch triples of a surface (see the module docstring). mod_as_domain=False keeps every ``:mod`` edge as
    written, (parent, mod, child), for the aspects that read the graph's shape (`structure_triples`)."""
    if not s.variables:
        raise AMRError("empty graph")
    concept_of = {v: _concept(c) for v, c in zip(s.variables, s.concepts, strict=True)}
    attributes: list[tuple[str, str, str]] = []
    relations: list[tuple[str, str, str]] = []
    smatch_conv = convention == "smatch"
    for src, role, tgt, const in s.edges:
        if not smatch_conv and not const:
            # as smatchpp: an even number of -of cancels (`:consist-of-of` is `:consist-of` inverted, though)
            while len(role) > 6 and role.endswith("-of-of") and role[:-3] not in INVERSION_EXCEPTIONS:
                role = role[:-6]
        if role.endswith("-of") and role not in INVERSION_EXCEPTIONS:
            if const:
                if smatch_conv:
                    continue  # the reference loses it
                attributes.append((src, role, _constant(tgt, True, convention)))
            elif role == "mod-of" and mod_as_domain and not smatch_conv:
                relations.append((src, "domain", tgt))  # :mod turned around, as :mod is (smatch 1.0.4 keeps mod)
            else:
                relations.append((tgt, role[:-3], src))
        elif role == "mod" and not const:
            relations.append((tgt, "domain", src) if mod_as_domain else (src, "mod", tgt))
        elif role == "mod" and smatch_conv:
            continue  # the reference loses a :mod to a constant
        elif const:
            attributes.append((src, role, _constant(tgt, tgt.startswith('"'), convention)))
        else:
            relations.append((src, role, tgt))
    variables = list(s.variables)
    if dereify:
        variables, relations, attributes = _dereify(variables, concept_of, relations, attributes, mod_as_domain)
    root = variables[0]
    top = "top" if smatch_conv else concept_of[root]
    attributes.insert(0, (root, "TOP", top))
    return SmatchTriples(tuple(variables), tuple((v, concept_of[v]) for v in variables), tuple(attributes),
                         tuple(relations))


def _dereify(variables, concept_of, relations, attributes, mod_as_domain):
    out_edges: dict[str, list[tuple[str, str, str]]] = {}
    in_count: dict[str, int] = {}
    for t in relations:
        out_edges.setdefault(t[0], []).append(t)
        in_count[t[2]] = in_count.get(t[2], 0) + 1
    with_attributes = {v for v, _, _ in attributes}
    drop: set[str] = set()
    new_relations: list[tuple[str, str, str]] = []
    for v in variables[1:]:
        rules = model.dereifications.get(concept_of[v])
        edges = out_edges.get(v, [])
        if not rules or len(edges) != 2 or in_count.get(v, 0) or v in with_attributes:
            continue
        roles = {r.lower(): t for _, r, t in edges}  # roles as written: `:arg1` is `:ARG1` (smatchpp lower-cases)
        for role, src_role, tgt_role in rules:
            src, tgt = roles.get(src_role[1:].lower()), roles.get(tgt_role[1:].lower())
            if src is not None and tgt is not None and src != v and tgt != v:
                name = role[1:]
                if name == "mod" and mod_as_domain:
                    new_relations.append((tgt, "domain", src))
                else:
                    new_relations.append((src, name, tgt))
                drop.add(v)
                break
    if not drop:
        return variables, relations, attributes
    relations = [t for t in relations if t[0] not in drop] + new_relations
    return [v for v in variables if v not in drop], relations, attributes
