"""What every derivative program goes through once traced: its dead code out,
the peephole passes over the derivative's nodes (fuse.py, masks.py), then the
names and comments that make it read like its formulas (readable.py)."""

from __future__ import annotations

import torch.fx

from . import fuse, readable
from .masks import prune_output_masks
from .trace import Traced


def finished(
    gm: torch.fx.GraphModule, value_nodes: dict, traced: Traced, kind: str
) -> torch.fx.GraphModule:
    """The program `gm` traced for `traced`; `value_nodes`: each original node's
    name -> the node of its tangent (`kind` "tangent") or cotangent ("grad")."""
    gm.graph.eliminate_dead_code()
    fuse.fuse_product_sums(gm, value_nodes)
    prune_output_masks(gm)
    return readable.name_and_annotate(
        gm, value_nodes, traced.input_names, traced.source, traced.name, kind
    )
