"""AMR graphs: parsing over penman and the triples that graph metrics compare."""

from amrsim.amr.graph import AMRError, SmatchTriples, parse, smatch_triples

__all__ = ["AMRError", "SmatchTriples", "parse", "smatch_triples"]
