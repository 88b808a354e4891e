"""Corpus: mutations of lists, dicts and objects the caller holds, traced and replayed after the
graph; each case returns the mutated object so the harness compares it with eager's."""

import torch

from pyframe.debug.cases import case


class _Holder:
    def __init__(self):
        self.count = 0
        self.last = None

    def __eq__(self, other):  # the harness compares results; compare what the trace changed
        if not isinstance(other, _Holder) or self.count != other.count:
            return False
        if self.last is None or other.last is None:
            return self.last is other.last
        return torch.allclose(self.last, other.last)


@case(inputs=lambda: (torch.randn(4), [torch.ones(4)]))
def append_to_list_argument_traced(x, acc):
    acc.append(x.sin())
    acc.extend([x.cos()])
    return x * len(acc), acc


@case(inputs=lambda: (torch.randn(4), {"scale": 3.0}))
def update_dict_argument(x, d):
    d["y"] = x * d["scale"]
    d.update({"z": x.relu()})
    return d["y"] + d.pop("scale"), d


@case(inputs=lambda: (torch.randn(4), _Holder()))
def set_attributes_on_argument(x, h):
    h.last = x.exp()
    h.count = h.count + 1
    return h.last * h.count, h


@case(inputs=lambda: (torch.randn(4), [torch.zeros(4)]))
def loop_appends_to_list_it_reads(x, items):
    for item in items:
        if len(items) < 3:
            items.append(item + x)
    return torch.stack(items).sum(0), items
