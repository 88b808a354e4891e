"""The ATen decompositions the "onnxrt" backend asks aot_autograd for.

aot_autograd hands its compilers ATen graphs; torch.onnx's exporter translates most ATen ops, but:

- training-mode batch norm (`_native_batch_norm_legit_functional`) comes out of torch.onnx as an
  inference-mode BatchNormalization whose new running statistics are the old ones: results are
  silently wrong. Decomposed into mean / var / arithmetic, it exports exactly;
- `convolution_backward` and `avg_pool2d_backward` have no ONNX translation and torch has no
  decomposition of them (inductor lowers them directly). Below, they are written as convolutions
  (and a sum), which export as Conv / ConvTranspose / ReduceSum.

The rest is torch's core ATen table, the opset torch.export produces.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten


def onnx_decompositions() -> dict[Any, Callable]:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions([
        aten._native_batch_norm_legit_functional,
        aten._native_batch_norm_legit,
        aten.native_batch_norm,
        aten.max_pool2d_with_indices_backward,
    ]))
    table[aten.convolution_backward.default] = convolution_backward
    table[aten.avg_pool2d_backward.default] = avg_pool2d_backward
    return table


def convolution_backward(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                         bias_sizes: Sequence[int] | None, stride: Sequence[int], padding: Sequence[int],
                         dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                         groups: int, output_mask: Sequence[bool]) -> Any:
    """The gradients of a (non-transposed) convolution by input, weight and bias, as convolutions.

    - input:  the transposed convolution of grad_output by the same weight; `output_padding` gives
      back the rows a strided convolution ignored, so the result has the input's size;
    - weight: a convolution whose batch is the channels and whose channels are the batch: input
      (channels first) convolved by grad_output (channels first) as the kernel, with stride and
      dilation exchanged; it can come out larger than the kernel (rows a stride skipped), so it is
      cut to the kernel's size. Groups are folded into the batch-as-channels dimension;
    - bias:   grad_output summed over every dimension but the channels.
    """
    if transposed:
        return NotImplemented  # the exporter reports it; pyframe then runs that graph eagerly
    spatial = range(2, grad_output.dim())
    kernel = weight.shape[2:]
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        extra = [input.shape[d] - ((grad_output.shape[d] - 1) * stride[d - 2] - 2 * padding[d - 2]
                                   + dilation[d - 2] * (kernel[d - 2] - 1) + 1) for d in spatial]
        grad_input = aten.convolution(grad_output, weight, None, stride, padding, dilation, True, extra, groups)
    if output_mask[1]:
        n, c_in, c_out = input.shape[0], input.shape[1] // groups, grad_output.shape[1] // groups
        rest_in, rest_out = input.shape[2:], grad_output.shape[2:]
        # input (n, g*c_in, ...) -> (c_in, g*n, ...); grad_output (n, g*c_out, ...) -> (g*c_out, n, ...)
        x = input.reshape(n, groups, c_in, *rest_in).transpose(0, 2).reshape(c_in, groups * n, *rest_in)
        k = grad_output.reshape(n, groups, c_out, *rest_out).movedim(0, 2).reshape(groups * c_out, n, *rest_out)
        w = aten.convolution(x, k, None, dilation, padding, stride, False, [0] * len(kernel), groups)
        for d, size in enumerate(kernel):  # (c_in, g*c_out, >= kernel) -> (g*c_out, c_in, kernel)
            w = w.narrow(d + 2, 0, size)
        grad_weight = w.transpose(0, 1).contiguous()
    if output_mask[2]:
        grad_bias = grad_output.sum([0, *spatial])
    return grad_input, grad_weight, grad_bias


def avg_pool2d_backward(grad_output: torch.Tensor, input: torch.Tensor, kernel_size: Sequence[int],
                        stride: Sequence[int], padding: Sequence[int], ceil_mode: bool,
                        count_include_pad: bool, divisor_override: int | None) -> Any:
    """Each output's gradient spread evenly over its window: a transposed depthwise convolution by a
    kernel of 1/divisor. Only where the divisor is the same for every window (no ceil_mode; no
    padding, or padding counted in the divisor)."""
    kernel = _pair(kernel_size)
    stride = _pair(stride) if stride else kernel
    padding = _pair(padding)
    if ceil_mode or (any(padding) and not count_include_pad and divisor_override is None):
        return NotImplemented
    channels = input.shape[-3]
    divisor = divisor_override or kernel[0] * kernel[1]
    ones = grad_output.new_full((channels, 1, *kernel), 1.0 / divisor)
    extra = [input.shape[d] - ((grad_output.shape[d] - 1) * stride[i] - 2 * padding[i] + kernel[i])
             for i, d in enumerate((-2, -1))]
    batched = grad_output if grad_output.dim() == 4 else grad_output.unsqueeze(0)
    grad_input = aten.convolution(batched, ones, None, stride, padding, [1, 1], True, extra, channels)
    return grad_input if grad_output.dim() == 4 else grad_input.squeeze(0)


def _pair(values: Sequence[int]) -> list[int]:
    return [values[0], values[0]] if len(values) == 1 else list(values)
