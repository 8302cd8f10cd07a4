"""Graph rewrites that let a voice engine run whole on a GPU, with CUDA graphs.

onnxruntime's CUDA provider runs a node on the CPU when its kernel wants host inputs or
its output shape depends on the data, inserting a copy each side; and a CUDA graph can
only be captured when every node runs on the device with shapes fixed from call to
call. The stock voice breaks both (measured on the H200, shared/recipes/gpu.md: 28
copies, first audio 3x slower than the CPU):

- symbolic shapes: every Shape → Gather → Concat chain is computed per call, on the CPU.
  `fixed_shapes` pins the inputs, so onnxruntime folds those chains into constants.
- masked indexing: the duration predictor's spline flows select the values inside the
  spline's interval (`x[mask]`, exported as NonZero → GatherND, and `y[mask] = v` as
  NonZero → ScatterND). NonZero's output size depends on the data. `dense_masked_indexing`
  computes the spline for every value and selects with Where instead.
- in-graph noise: RandomNormalLike would draw the same numbers at every replay of a
  captured graph. `noise_as_input` makes the noise an input the caller draws, so each
  call has fresh noise and a seeded CPU and GPU run get the same.

`fused_layer_norms` is not needed to run on a GPU either, but makes a run there (and on
the CPU) faster: the voice's layer norms (over channels: transpose, then mean, variance,
scale and shift in nine nodes, transpose back) become one LayerNormalization each. onnxruntime fuses the
nine itself only when its transpose optimizer has not first moved the transposes through
them, which it does: on the stock voice's acoustic stage no norm is fused.
A captured graph's time is mostly its kernels' count (3.0 ms on an H100 for the acoustic
stage, ~970 nodes once onnxruntime has optimized it; bench/results/acoustic_split_h100.json).

`compact_splines` is not needed to run on a GPU either: the duration predictor's spline
couplings, ~105 kernels each once onnxruntime has optimized them, written out in ~65 that
compute the same numbers (no ScatterND for the bins' ends, one gather for the values the
inverse reads, no masked indexing).

`half_precision` is not needed to run on a GPU but may make a run faster there: the
graph computed in float16, its inputs and outputs still float32.

Each rewrite returns a new model and leaves its argument alone; each checks the pattern
it rewrites and raises ValueError on anything else, rather than guess.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

log = logging.getLogger(__name__)

NOISE_INPUT = "duration_noise"


def fixed_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    """`model` with each named input's shape pinned to `shapes[name]`, and the shapes
    that follow inferred (value_info), so later rewrites and onnxruntime see them."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    names = {i.name for i in fixed.graph.input}
    if unknown := set(shapes) - names:
        raise ValueError(f"no inputs named {sorted(unknown)} (inputs: {sorted(names)})")
    for graph_input in fixed.graph.input:
        if graph_input.name not in shapes:
            continue
        shape = graph_input.type.tensor_type.shape
        shape.ClearField("dim")
        for size in shapes[graph_input.name]:
            shape.dim.add().dim_value = size
    del fixed.graph.value_info[:]
    return shape_inference.infer_shapes(fixed, data_prop=True)


def dense_masked_indexing(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every `x[mask]` / `y[mask] = v` (NonZero → Transpose → GatherND /
    ScatterND) computed densely: the gather becomes a reshape of all rows, the scatter a
    Where over the mask. The values between them are computed for every row, also those
    outside the mask; rows are computed independently (the pattern this module is for),
    so the rows the mask keeps are unchanged, and the Where drops the others (which may
    be NaN: a spline evaluated outside its interval).

    Needs static shapes (`fixed_shapes` first): the reshapes are to the mask's size.
    """
    dense = onnx.ModelProto()
    dense.CopyFrom(model)
    graph = dense.graph
    shapes = _static_shapes(dense)
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    replaced: dict[int, list[onnx.NodeProto]] = {}  # id(node) -> nodes in its place
    dropped: set[int] = set()
    constants: list[onnx.TensorProto] = []

    def constant(name: str, values: list[int]) -> str:
        constants.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    for nonzero in [n for n in graph.node if n.op_type == "NonZero"]:
        mask = nonzero.input[0]
        if mask not in shapes:
            raise ValueError(f"{nonzero.name}: the mask's shape is not static (fixed_shapes first)")
        mask_shape = shapes[mask]
        rows = int(np.prod(mask_shape))
        transposes = consumers.get(nonzero.output[0], [])
        if len(transposes) != 1 or transposes[0].op_type != "Transpose":
            raise ValueError(f"{nonzero.name}: NonZero not followed by one Transpose")
        transpose = transposes[0]
        dropped.update({id(nonzero), id(transpose)})
        for use in consumers.get(transpose.output[0], []):
            out = use.output[0]
            base = f"{use.name}/dense"
            if use.op_type == "GatherND" and use.input[1] == transpose.output[0]:
                if _attribute(use, "batch_dims", 0) != 0:
                    raise ValueError(f"{use.name}: GatherND with batch_dims")
                rest = shapes[use.input[0]][len(mask_shape):]
                replaced[id(use)] = [helper.make_node(
                    "Reshape", [use.input[0], constant(f"{base}/shape", [rows, *rest])], [out],
                    name=base)]
            elif use.op_type == "ScatterND" and use.input[1] == transpose.output[0]:
                if _attribute(use, "reduction", b"none") not in (b"none", "none"):
                    raise ValueError(f"{use.name}: ScatterND with a reduction")
                data_shape = shapes[use.input[0]]
                trailing = len(data_shape) - len(mask_shape)
                select = [helper.make_node(
                    "Reshape", [use.input[2], constant(f"{base}/data_shape", list(data_shape))],
                    [f"{base}/updates"], name=f"{base}/updates")]
                where_mask = mask
                if trailing:
                    where_mask = f"{base}/mask"
                    select.append(helper.make_node(
                        "Reshape", [mask, constant(f"{base}/mask_shape",
                                                   [*mask_shape, *[1] * trailing])],
                        [where_mask], name=where_mask))
                select.append(helper.make_node(
                    "Where", [where_mask, f"{base}/updates", use.input[0]], [out], name=base))
                replaced[id(use)] = select
            elif use.op_type == "Shape":
                # The count of selected rows, for reshapes between gather and scatter:
                # now every row.
                replaced[id(use)] = [helper.make_node(
                    "Constant", [], [out], name=base,
                    value=numpy_helper.from_array(np.array([rows, len(mask_shape)], np.int64)))]
            else:
                raise ValueError(f"{use.name}: a {use.op_type} uses NonZero's indices")

    nodes = []
    for node in graph.node:
        if id(node) in dropped:
            continue
        nodes.extend(replaced.get(id(node), [node]))
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(constants)
    del graph.value_info[:]
    return shape_inference.infer_shapes(dense, data_prop=True)


def fused_layer_norms(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with each layer norm written out over the last axis (ReduceMean → Sub →
    Pow 2 → ReduceMean → Add ε → Sqrt → Div → Mul γ → Add β, as torch exports
    `F.layer_norm` below opset 17, the means over the same last axis, γ and β constant
    vectors as long as that axis) replaced by one LayerNormalization over that axis.
    Anything else, including a chain whose values are also used elsewhere or whose input's
    shape is not known, is left as it is. onnxruntime defines LayerNormalization in the
    default domain from opset 1; onnx itself from 17."""
    fused = onnx.ModelProto()
    fused.CopyFrom(model)
    graph = fused.graph
    shapes, inferred = _value_info(fused), False

    def axis_length(name: str) -> tuple[int, ...] | None:
        """The length of `name`'s last axis, if known (the others may be symbolic: a CPU
        graph). Shapes are inferred once, and only if the graph does not say: inference
        took ~100 ms for the voice's acoustic stage on the 2-vCPU VM."""
        nonlocal shapes, inferred
        dims = shapes[name].type.tensor_type.shape.dim if name in shapes else []
        if dims and dims[-1].HasField("dim_value"):
            return (dims[-1].dim_value,)
        if inferred:
            return None
        shapes, inferred = _value_info(shape_inference.infer_shapes(fused)), True
        return axis_length(name)

    made, uses, initializers = _index(graph)

    def constant(name: str) -> np.ndarray | None:
        return _constant(name, made, initializers)

    outputs = {value.name for value in graph.output}

    def sole(name: str, op_type: str) -> onnx.NodeProto | None:
        """The one node using `name`, if of `op_type` and `name` is not also an output."""
        used = uses.get(name, [])
        if len(used) == 1 and used[0].op_type == op_type and name not in outputs:
            return used[0]
        return None

    def last_axis(node: onnx.NodeProto) -> bool:
        return (node.op_type == "ReduceMean" and _attribute(node, "axes", None) == [-1]
                and _attribute(node, "keepdims", 1) == 1)

    replaced: dict[int, onnx.NodeProto] = {}  # id(the chain's last node) -> its fused node
    dropped: set[int] = set()
    for mean in [n for n in graph.node if last_axis(n)]:
        x = mean.input[0]
        centred = sole(mean.output[0], "Sub")
        if centred is None or list(centred.input) != [x, mean.output[0]]:
            continue
        both = sorted(uses.get(centred.output[0], []), key=lambda n: n.op_type)
        if [n.op_type for n in both] != ["Div", "Pow"] or centred.output[0] in outputs:
            continue
        divide, square = both
        variance = sole(square.output[0], "ReduceMean")
        plus = variance and last_axis(variance) and sole(variance.output[0], "Add")
        root = plus and sole(plus.output[0], "Sqrt")
        scale = (root and sole(root.output[0], "Div") is divide
                 and list(divide.input) == [centred.output[0], root.output[0]]
                 and sole(divide.output[0], "Mul"))
        shift = scale and sole(scale.output[0], "Add")
        if not shift:
            continue
        two, epsilon = constant(square.input[1]), constant(plus.input[1])
        gamma, beta = constant(scale.input[1]), constant(shift.input[1])
        if (two is None or two.size != 1 or two.item() != 2.0 or epsilon is None
                or epsilon.size != 1 or gamma is None or beta is None or gamma.ndim != 1
                or beta.shape != gamma.shape or axis_length(x) != gamma.shape):
            continue
        chain = [mean, centred, square, variance, plus, root, divide, scale, shift]
        dropped.update(id(n) for n in chain)
        replaced[id(shift)] = helper.make_node(
            "LayerNormalization", [x, scale.input[1], shift.input[1]], [shift.output[0]],
            name=f"{mean.name}/fused", axis=-1, epsilon=epsilon.item())
    # The chains' own constants (ε, the 2) go with them.
    _replace_nodes(graph, [replaced.get(id(n), n) for n in graph.node
                           if id(n) not in dropped or id(n) in replaced], dropped)
    return fused


def compact_splines(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with each spline coupling of a VITS duration predictor (a ConvFlow: the
    inverse of a rational-quadratic spline with linear tails, as torch exports it: ~105
    nodes once onnxruntime has optimized it) written out in ~65: the bins' widths and heights
    made side by side in one tensor, every value the inverse reads taken by one
    GatherElements, the ends set by padding instead of ScatterND, and no masked indexing
    (every value is computed, and a Where keeps the input outside the tails, as the
    spline does). Each value is computed by the same operations in the same order as in
    the graph as exported, so the results are the same numbers; `_same_numbers` checks
    that on random inputs before a coupling is replaced, and any it cannot match or that
    gives other numbers (another spline's settings) is left as it is.

    Why: on a GPU a captured graph's time is mostly its kernels' count, and the duration
    predictor's three splines were ~310 of the acoustic stage's ~750 kernels."""
    compact = onnx.ModelProto()
    compact.CopyFrom(model)
    graph = compact.graph
    made, uses, initializers = _index(graph)
    regions = {id(concat): region for concat in graph.node
               if concat.op_type == "Concat" and len(concat.input) == 2
               and (region := _spline_region(concat, made, uses, initializers, graph))}
    written = {key: _spline_nodes(*region.spline, prefix=region.prefix)
               for key, region in regions.items()}
    same = _same_numbers(list(regions.values()), list(written.values()), initializers, model)
    dropped: set[int] = set()
    added: dict[int, list[onnx.NodeProto]] = {}  # id(the coupling's Concat) -> nodes before it
    constants: list[onnx.TensorProto] = []
    for key, ok in zip(regions, same):
        if ok:
            dropped.update(id(n) for n in regions[key].nodes)
            added[key], tensors = written[key]
            constants.extend(tensors)
    if not added:
        return compact
    nodes = []
    for node in graph.node:
        nodes.extend(added.get(id(node), []))
        if id(node) not in dropped:
            nodes.append(node)
    _replace_nodes(graph, nodes, dropped, constants)
    return compact


# The spline's settings that the graph holds only folded into other constants: piper's
# (and VITS's) transforms.py defaults (its minimum bin width and height are one value),
# checked on random inputs before any use.
_MIN_BIN_SIZE = _MIN_DERIVATIVE = 1e-3


@dataclass(frozen=True)
class _Coupling:
    """A spline coupling's nodes as exported, its input x0 (whose shape they may read),
    the channels of its projection h, the prefix of its nodes' names, and _spline_nodes'
    arguments: its input x1, h, the tail bound, the bins' divisor, the bin count and its
    result."""

    nodes: list[onnx.NodeProto]
    x0: str
    channels: int
    prefix: str
    spline: tuple[str, str, float, float, int, str]


def _spline_region(concat, made, uses, initializers, graph) -> _Coupling | None:
    """The spline coupling ending at `concat`, if it is one this module can write out."""
    split = made.get(concat.input[0])
    if (split is None or split.op_type != "Split" or len(split.output) != 2
            or split.output[0] != concat.input[0] or _attribute(concat, "axis", None) != 1):
        return None
    x0, x1, y = split.output[0], split.output[1], concat.input[1]
    inputs = {value.name for value in graph.input}
    region: dict[int, onnx.NodeProto] = {}
    h = None
    todo = [y]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen or name in (x0, x1) or name in initializers or not name:
            continue
        seen.add(name)
        node = made.get(name)
        if node is None or name in inputs:
            return None  # a graph input the spline should not read
        if node.op_type == "Mul" and any(made.get(i) is not None and made[i].op_type == "Conv"
                                         for i in node.input):
            if h not in (None, name):
                return None
            h = name
            continue
        if node.op_type == "Conv":
            return None
        region[id(node)] = node
        todo.extend(node.input)
    if h is None:
        return None
    projection = next(made[i] for i in made[h].input if made.get(i) is not None
                      and made[i].op_type == "Conv")
    weight = initializers.get(projection.input[1])
    if weight is None or weight.dims[0] % 3 != 2:
        return None
    bins = (weight.dims[0] + 1) // 3
    outputs = {value.name for value in graph.output}
    for node in region.values():
        for out in node.output:
            if out in outputs or any(id(u) not in region and not (u is concat and out == y)
                                     for u in uses.get(out, [])):
                return None
    nodes = [n for n in graph.node if id(n) in region]

    def scalar(name):
        value = _constant(name, made, initializers)
        return value.item() if value is not None and value.size == 1 else None

    lows = {scalar(n.input[1]) for n in nodes if n.op_type == "GreaterOrEqual" and n.input[0] == x1}
    highs = {scalar(n.input[1]) for n in nodes if n.op_type == "LessOrEqual" and n.input[0] == x1}
    divisors = {scalar(n.input[1]) for n in nodes if n.op_type == "Div"} - {None}
    if len(highs) != 1 or lows != {-next(iter(highs))} or len(divisors) != 1:
        return None
    return _Coupling(nodes, x0, weight.dims[0], concat.name.rsplit("/", 1)[0],
                     (x1, h, next(iter(highs)), next(iter(divisors)), bins, y))


def _same_numbers(couplings: list[_Coupling], written, initializers,
                  model: onnx.ModelProto) -> list[bool]:
    """Whether each of `couplings` as exported and its `written`-out nodes give the same
    numbers, bit for bit, for random inputs (two rows of 37 values, a third of them
    outside the tails) on onnxruntime's CPU provider, all in one session."""
    import onnxruntime  # not needed at import: a graph rewrite

    if not couplings:
        return []
    rng = np.random.default_rng(0)
    nodes, tensors, inputs, outputs, feed = [], [], [], [], {}
    for coupling, (spline, constants) in zip(couplings, written):
        x1, h, *_, y = coupling.spline
        feed[coupling.x0] = rng.normal(size=(2, 1, 37)).astype(np.float32)
        feed[x1] = (rng.normal(size=(2, 1, 37)) * 6).astype(np.float32)
        feed[h] = (rng.normal(size=(2, coupling.channels, 37)) * 3).astype(np.float32)
        # The written-out nodes' result under another name, beside the exported one.
        renamed = [onnx.NodeProto() for _ in spline]
        for copy, node in zip(renamed, spline):
            copy.CopyFrom(node)
            copy.output[:] = [f"{y}/written" if o == y else o for o in node.output]
        nodes += [*coupling.nodes, *renamed]
        tensors += constants
        outputs += [y, f"{y}/written"]
        inputs += [coupling.x0, x1, h]
    used = {i for n in nodes for i in n.input}
    graph = helper.make_graph(
        nodes, "splines", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [*[initializers[i] for i in used if i in initializers], *tensors])
    # The model's own IR version and opsets: onnx's newest may be newer than onnxruntime's.
    check = helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    # The operations as written: optimizing them took ~30 ms of the check's ~40.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = onnxruntime.InferenceSession(check.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        results = session.run(None, feed)
    except Exception as exc:  # noqa: BLE001 - what the check cannot run is not rewritten
        log.warning("spline couplings left as exported: their check did not run (%s)", exc)
        return [False] * len(couplings)
    same = [a.shape == b.shape and bool(np.array_equal(a, b))
            for a, b in zip(results[::2], results[1::2])]
    for coupling, ok in zip(couplings, same):
        if not ok:
            log.warning("%s left as exported: written out, it gives other numbers", coupling.prefix)
    return same


def _spline_nodes(x1: str, h: str, bound: float, divisor: float, bins: int, y: str,
                  prefix: str) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Nodes computing `y`, the inverse of the rational-quadratic spline of `bins` bins
    whose unnormalized widths, heights and inner derivatives are `h`'s channels
    (b × 3·bins−1 × t), at `x1` (b × 1 × t), the identity outside ±`bound`: the
    operations of nflows' `unconstrained_rational_quadratic_spline` (inverse, linear
    tails) in its order, over every value. With the initializers they add."""
    nodes: list[onnx.NodeProto] = []
    tensors: list[onnx.TensorProto] = []
    k = bins

    def const(name: str, value, dtype=np.float32) -> str:
        tensors.append(numpy_helper.from_array(np.asarray(value, dtype), f"{prefix}/{name}/value"))
        return f"{prefix}/{name}/value"

    def op(op_type: str, inputs: list[str], name: str, outputs: int = 1, **attributes):
        out = [f"{prefix}/{name}" if outputs == 1 else f"{prefix}/{name}_{i}"
               for i in range(outputs)]
        nodes.append(helper.make_node(op_type, inputs, out, name=f"{prefix}/{name}",
                                      **attributes))
        return out[0] if outputs == 1 else out

    def take(value: str, name: str, axes: list[int], starts: list[int], ends: list[int]):
        return op("Slice", [value, const(f"{name}/starts", starts, np.int64),
                            const(f"{name}/ends", ends, np.int64),
                            const(f"{name}/axes", axes, np.int64)], name)

    low, high = np.float32(-bound), np.float32(bound)
    rows = op("Transpose", [h], "rows", perm=[0, 2, 1])  # b × t × 3k−1
    # Widths (0) and heights (1) side by side: b × t × 2 × k.
    sizes = op("Reshape", [take(rows, "sizes_raw", [2], [0], [2 * k]),
                           const("sizes_shape", [0, 0, 2, k], np.int64)], "sizes_rows")
    sizes = op("Div", [sizes, const("divisor", divisor)], "sizes_scaled")
    sizes = op("Softmax", [sizes], "sizes_softmax", axis=-1)
    share = np.float32(1.0) - np.float32(k) * np.float32(_MIN_BIN_SIZE)
    sizes = op("Add", [op("Mul", [sizes, const("share", share)], "sizes_shared"),
                       const("floor", _MIN_BIN_SIZE)], "sizes")
    inner = take(op("CumSum", [sizes, const("last_axis", -1, np.int64)], "cumsum"),
                 "inner", [3], [0], [k - 1])
    inner = op("Add", [op("Mul", [inner, const("span", high - low)], "inner_scaled"),
                       const("low", low)], "inner_placed")
    ends = np.zeros(k + 1, np.float32)
    ends[0], ends[-1] = low, high
    edges = op("Add", [op("Pad", [inner, const("edge_pads", [0, 0, 0, 1, 0, 0, 0, 1], np.int64)],
                          "inner_padded"), const("ends", ends)], "edges")  # b × t × 2 × k+1
    widths = op("Sub", [take(edges, "upper", [3], [1], [k + 1]),
                        take(edges, "lower", [3], [0], [k])], "widths")  # b × t × 2 × k
    tail = np.float32(np.log(np.exp(1 - _MIN_DERIVATIVE) - 1))
    slopes = op("Pad", [take(rows, "slopes_raw", [2], [2 * k], [3 * k - 1]),
                        const("slope_pads", [0, 0, 1, 0, 0, 1], np.int64), const("tail", tail)],
                "slopes_padded")
    slopes = op("Add", [op("Softplus", [slopes], "slopes_softplus"),
                        const("min_slope", _MIN_DERIVATIVE)], "slopes")  # b × t × k+1
    # The bin each x lies in, by the inner height edges (0 … k−1, for any x; the same as
    # searching all k+1 edges, the last raised by ε, for x within the tails).
    x = op("Reshape", [x1, const("x_shape", [0, -1, 1], np.int64)], "x")  # b × t × 1
    inner_heights = op("Reshape", [take(edges, "height_edges", [2, 3], [1, 1], [2, k]),
                                   const("edges_shape", [0, 0, k - 1], np.int64)],
                       "inner_heights")
    above = op("Cast", [op("GreaterOrEqual", [x, inner_heights], "above_edges")], "above",
               to=TensorProto.INT64)
    index = op("ReduceSum", [above, const("sum_axis", [-1], np.int64)], "bin", keepdims=1)
    # One gather: [left edges of widths, of heights | widths, heights | slopes].
    table = op("Concat", [
        op("Reshape", [edges, const("edges_flat", [0, 0, 2 * (k + 1)], np.int64)], "edges_flat"),
        op("Reshape", [widths, const("widths_flat", [0, 0, 2 * k], np.int64)], "widths_flat"),
        slopes], "table", axis=-1)
    offsets = [0, k + 1, 2 * k + 2, 3 * k + 2, 4 * k + 2, 4 * k + 3]
    picked = op("GatherElements", [table, op("Add", [index, const("offsets", offsets, np.int64)],
                                             "picks")], "picked", axis=-1)
    left, bottom, width, height, slope, next_slope = op(
        "Split", [picked], "values", outputs=6, axis=-1)
    two, four = const("two", 2.0), const("four", 4.0)
    delta = op("Div", [height, width], "delta")
    rise = op("Sub", [x, bottom], "rise")
    bend = op("Sub", [op("Add", [slope, next_slope], "slopes_sum"),
                      op("Mul", [delta, two], "delta_twice")], "bend")
    rise_bend = op("Mul", [rise, bend], "rise_bend")
    a = op("Add", [rise_bend, op("Mul", [height, op("Sub", [delta, slope], "delta_less_slope")],
                                 "height_term")], "a")
    b = op("Sub", [op("Mul", [height, slope], "height_slope"), rise_bend], "b")
    c = op("Mul", [op("Neg", [delta], "delta_negated"), rise], "c")
    discriminant = op("Sub", [op("Pow", [b, two], "b_squared"),
                              op("Mul", [op("Mul", [a, four], "a_four"), c], "four_ac")],
                      "discriminant")
    root = op("Div", [op("Mul", [c, two], "c_twice"),
                      op("Sub", [op("Neg", [b], "b_negated"),
                                 op("Sqrt", [discriminant], "root_of_discriminant")],
                         "denominator")], "root")
    inverse = op("Add", [op("Mul", [root, width], "root_width"), left], "inverse")
    inverse = op("Reshape", [inverse, const("out_shape", [0, 1, -1], np.int64)], "inverse_rows")
    inside = op("And", [op("GreaterOrEqual", [x1, const("low_bound", low)], "above_low"),
                        op("LessOrEqual", [x1, const("high_bound", high)], "below_high")],
                "inside")
    nodes.append(helper.make_node("Where", [inside, inverse, x1], [y], name=f"{prefix}/spline"))
    return nodes, tensors


def noise_as_input(model: onnx.ModelProto, name: str = NOISE_INPUT) -> onnx.ModelProto:
    """`model` with its one RandomNormalLike (standard normal, float) replaced by an input
    `name` of the same shape, which the caller fills with standard normal noise."""
    noisy = onnx.ModelProto()
    noisy.CopyFrom(model)
    graph = noisy.graph
    randoms = [n for n in graph.node if n.op_type == "RandomNormalLike"]
    if len(randoms) != 1:
        raise ValueError(f"expected one RandomNormalLike, found {len(randoms)}")
    random = randoms[0]
    if (_attribute(random, "mean", 0.0), _attribute(random, "scale", 1.0),
            _attribute(random, "dtype", TensorProto.FLOAT)) != (0.0, 1.0, TensorProto.FLOAT):
        raise ValueError(f"{random.name}: not standard normal float noise")
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    like = _value_info(inferred).get(random.input[0])
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or f"noise_{i}")
            for i, d in enumerate(like.type.tensor_type.shape.dim)] if like else None
    if not dims:
        raise ValueError(f"{random.name}: the noise's rank is unknown")
    graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
    nodes = [n for n in graph.node if n is not random]
    for node in nodes:
        for i, value in enumerate(node.input):
            if value == random.output[0]:
                node.input[i] = name
    del graph.node[:]
    graph.node.extend(nodes)
    return noisy


def half_precision(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` (static shapes) computing in float16 between float32 inputs and outputs,
    by onnxruntime's converter, which keeps in float32 the ops it lists as unsafe in
    half precision and each value it would overflow. Its cast nodes are appended, not
    sorted in: onnxruntime sorts the graph itself, onnx's checker would refuse it."""
    # Imported when first asked for: ~80 ms at start-up otherwise, for a path off by default.
    from onnxruntime.transformers.float16 import convert_float_to_float16

    return convert_float_to_float16(model, keep_io_types=True)


def _replace_nodes(graph: onnx.GraphProto, nodes: list[onnx.NodeProto], dropped: set[int],
                   constants: list[onnx.TensorProto] = ()) -> None:
    """`graph`'s nodes made `nodes` and `constants` added to its initializers; those only
    the `dropped` nodes (by id) read go, unless an input or output of the graph:
    onnxruntime warns of every unused initializer."""
    theirs = {name for node in graph.node if id(node) in dropped for name in node.input}
    theirs -= {name for node in nodes for name in node.input}
    theirs -= {value.name for value in [*graph.input, *graph.output]}
    kept = [t for t in graph.initializer if t.name not in theirs]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend([*kept, *constants])


def _constant(name: str, made: dict[str, onnx.NodeProto],
              initializers: dict[str, onnx.TensorProto]) -> np.ndarray | None:
    """`name`'s value where a Constant node or an initializer gives it, else None."""
    node = made.get(name)
    if node is not None and node.op_type == "Constant":
        return numpy_helper.to_array(_attribute(node, "value", None))
    return numpy_helper.to_array(initializers[name]) if name in initializers else None


def _index(graph: onnx.GraphProto):
    """Each value's node, each value's users, and the initializers by name."""
    made = {o: n for n in graph.node for o in n.output}
    uses: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            uses.setdefault(name, []).append(node)
    return made, uses, {t.name: t for t in graph.initializer}


def _value_info(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    graph = model.graph
    return {v.name: v for v in [*graph.input, *graph.value_info, *graph.output]}


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for name, info in _value_info(model).items():
        dims = info.type.tensor_type.shape.dim
        if info.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            shapes[name] = tuple(d.dim_value for d in dims)
    for tensor in model.graph.initializer:
        shapes[tensor.name] = tuple(tensor.dims)
    return shapes


def _attribute(node: onnx.NodeProto, name: str, default):
    for attribute in node.attribute:
        if attribute.name == name:
            return helper.get_attribute_value(attribute)
    return default
