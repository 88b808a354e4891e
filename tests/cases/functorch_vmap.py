"""Corpus: torch.vmap and what is built on it, inside a compiled function.

torch._dynamo 2.13 inlines vmap's Python (torch/_functorch/vmap.py) and records its four C calls
through torch/_functorch/predispatch.py's wrappers: `lazy_load_decompositions()`,
`_vmap_increment_nesting(batch_size, randomness)`, `_add_batch_dim(x, dim, level)` per batched
input, the function's own ops on the batched tensors, then `_remove_batch_dim(...)` per output and
`_vmap_decrement_nesting()`. Nested vmaps nest the levels; torch's generic associative_scan is
vmap over its combine function, one level per step of the scan.
"""

import torch
from torch._higher_order_ops.associative_scan import associative_scan

from pyframe.debug.cases import case


@case(inputs=lambda: torch.randn(3, 4))
def vmap_of_a_lambda_over_rows(x):
    """One level: each row's sum scales the row."""
    return torch.vmap(lambda row: row.sum() * row)(x) + 1


@case(inputs=lambda: (torch.randn(3, 4), torch.randn(4)))
def vmap_with_an_unbatched_argument(x, w):
    """in_dims=(0, None): the weight is shared by every row, not batched."""
    return torch.vmap(lambda row, v: (row * v).sum(), in_dims=(0, None))(x, w)


@case(inputs=lambda: (torch.arange(4), torch.arange(5)))
def vmap_nested_over_four_index_dimensions(q, kv):
    """A mask built by four nested vmaps over (batch, head, query, key) indices, as transformers'
    masking utilities build a 4-D attention mask from an index function."""
    def allowed(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (b >= 0)

    fn = allowed
    for dims in [(None, None, None, 0), (None, None, 0, None), (None, 0, None, None), (0, None, None, None)]:
        fn = torch.vmap(fn, in_dims=dims, out_dims=0)
    return fn(torch.arange(2), torch.arange(1), q, kv)


@case(inputs=lambda: (torch.rand(2, 3, 4), torch.rand(2, 3, 4)))
def associative_scan_generic(a, b):
    """A linear recurrence scanned with combine_mode="generic" (a selective-state-space model's
    scan on CPU): vmap over the combine function at each step of the scan."""
    def combine(left, right):
        a_left, b_left = left
        a_right, b_right = right
        return a_left * a_right, a_right * b_left + b_right

    _, states = associative_scan(combine, (a, b), dim=2, combine_mode="generic")
    return states.sum(-1)


@case(inputs=lambda: torch.randn(2, 3))
def vmap_returning_two_outputs(x):
    """Two outputs, each unbatched with its own _remove_batch_dim, at out_dims (0, 1)."""
    return torch.vmap(lambda r: (r.cos(), r * 2), out_dims=(0, 1))(x)
