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

`half_precision` is not needed to run on a GPU but may make a run faster there: the
graph computed in float16, its inputs and outputs still float32.

Each rewrite returns a new model and leaves its argument alone; each checks the pattern
it rewrites and raises ValueError on anything else, rather than guess.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

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

    made = {o: n for n in graph.node for o in n.output}
    uses: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            uses.setdefault(name, []).append(node)
    initializers = {t.name: t for t in graph.initializer}

    def constant(name: str) -> np.ndarray | None:
        node = made.get(name)
        if node is not None and node.op_type == "Constant":
            return numpy_helper.to_array(_attribute(node, "value", None))
        return numpy_helper.to_array(initializers[name]) if name in initializers else None

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
    nodes = [replaced.get(id(n), n) for n in graph.node
             if id(n) not in dropped or id(n) in replaced]
    # The chains' own constants (ε, the 2), where nothing else uses them: onnxruntime
    # warns of every unused initializer.
    theirs = {name for node in graph.node if id(node) in dropped for name in node.input}
    theirs -= {name for node in nodes for name in node.input}
    theirs -= {value.name for value in graph.input} | outputs
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [t for t in graph.initializer if t.name not in theirs]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return fused


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
