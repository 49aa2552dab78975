"""A ResNet bottleneck block and a BERT encoder layer, built by the zoo's own code
(tests/models/test_resnet.py, tests/models/bert.py), match PyTorch written independently
here: the same weights, the same float32 inputs; outputs and the gradients of a fixed
weighted sum of them (input and every parameter) within 1e-4 relative.

The gradients come from one SGD step of learning rate 1 (the variable before minus after),
as tests/ops/harness.py takes them; PyTorch's from autograd. PyTorch is a test-only
reference (not a dependency of aioflow): without it these tests skip, saying so."""

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from . import bert
from .test_resnet import ResnetBuilder

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the numerical "
                            "comparison with PyTorch needs it (pip install torch)")
F = torch.nn.functional

RTOL = 1e-4


def _close(got, want, what, scale=None):
    """Within 1e-4 of ``want`` relative to its largest element (or to ``scale``)."""
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    assert got.shape == want.shape, (what, got.shape, want.shape)
    scale = scale or float(np.abs(want).max()) or 1.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale, err_msg=what)


def _run_train_step(build, x, params, cotangent):
    """Build ``y = build(x_variable)`` in a train job whose loss is ``sum(y * cotangent)``,
    load ``params`` (name -> array) and ``x``, take one SGD step of rate 1; return ``y`` and
    the gradients (before minus after) of ``x`` and of every parameter."""
    @flow.global_function(type="train")
    def step(cot: tp.Numpy.Placeholder(cotangent.shape)) -> tp.Numpy:
        xv = flow.get_variable("parity_input", shape=x.shape, dtype=flow.float,
                               initializer=flow.zeros_initializer())
        y = build(xv)
        flow.optimizer.SGD(1.0, momentum=0).minimize(flow.math.reduce_sum(y * cot))
        return y

    flow.load_variables({"parity_input": x, **params})
    before = {k: v.copy() for k, v in flow.get_all_variables().items()}
    assert set(params) <= set(before), sorted(set(params) - set(before))
    y = step(cotangent)
    after = flow.get_all_variables()
    grads = {name: before[name] - after[name] for name in ["parity_input", *params]}
    return y, grads


# -- ResNet bottleneck block --------------------------------------------------------------


def _same_pad(x, kernel, stride):
    """OneFlow's conv2d "SAME" is "SAME_LOWER": an odd total pad puts the extra element
    before (top / left), unlike TensorFlow."""
    size = x.shape[-1]
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    before, after = total - total // 2, total // 2
    return F.pad(x, (before, after, before, after))


def _torch_bottleneck(x, p, prefix, strides, shortcut):
    def conv(name, t, kernel, stride):
        weight = p[f"{prefix}_{name}-weight"]
        padded = _same_pad(t, kernel, stride) if kernel > 1 or stride > 1 else t
        return F.conv2d(padded, weight, stride=stride)

    def bn(name, t):
        return F.batch_norm(t, None, None, p[f"{name}-gamma"], p[f"{name}-beta"],
                            training=True, eps=1e-5)

    a = F.relu(bn(f"{prefix}_branch2a_bn_relu", conv("branch2a", x, 1, 1)))
    b = F.relu(bn(f"{prefix}_branch2b_bn_relu", conv("branch2b", a, 3, strides)))
    c = bn(f"{prefix}_branch2c_bn_add_relu", conv("branch2c", b, 1, 1))
    if shortcut:
        x = bn(f"{prefix}_branch1_bn", conv("branch1", x, 1, strides))
    return F.relu(c + x)


@pytest.mark.parametrize("block_name, strides", [("res2_0", 1), ("res3_0", 2)])
def test_resnet_bottleneck_block_matches_pytorch(block_name, strides):
    rng = np.random.default_rng(3)
    channels, inner, filters = 8, 4, 16
    x = rng.standard_normal((2, channels, 8, 8)).astype(np.float32)
    params = {}
    for name, shape in [("branch2a", (inner, channels, 1, 1)), ("branch2b", (inner, inner, 3, 3)),
                        ("branch2c", (filters, inner, 1, 1)), ("branch1", (filters, channels, 1, 1))]:
        params[f"{block_name}_{name}-weight"] = (
            rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))).astype(np.float32)
    for bn, width in [("branch2a_bn_relu", inner), ("branch2b_bn_relu", inner),
                      ("branch2c_bn_add_relu", filters), ("branch1_bn", filters)]:
        params[f"{block_name}_{bn}-gamma"] = rng.uniform(0.5, 1.5, width).astype(np.float32)
        params[f"{block_name}_{bn}-beta"] = rng.uniform(-0.5, 0.5, width).astype(np.float32)
    out_size = 8 // strides
    cot = rng.standard_normal((2, filters, out_size, out_size)).astype(np.float32)

    builder = ResnetBuilder(weight_regularizer=None)
    y, grads = _run_train_step(
        lambda xv: builder.residual_block(xv, block_name, filters, inner, strides),
        x, params, cot)

    tx = torch.tensor(x, requires_grad=True)
    tp_ = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    ty = _torch_bottleneck(tx, tp_, block_name, strides, shortcut=True)
    (ty * torch.tensor(cot)).sum().backward()
    _close(y, ty, "output")
    _close(grads["parity_input"], tx.grad, "input gradient")
    for name, tensor in tp_.items():
        _close(grads[name], tensor.grad, f"gradient of {name}")


# -- BERT encoder layer -------------------------------------------------------------------


CFG = bert.BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _torch_encoder_layer(x, addr, p, cfg):
    heads, width = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads

    def dense(name, t):
        return t @ p[f"{name}-weight"] + p[f"{name}-bias"]

    def norm(name, t):
        return F.layer_norm(t, (cfg.hidden_size,), p[f"{name}-gamma"], p[f"{name}-beta"],
                            eps=1e-5)

    def per_head(t):
        return t.reshape(-1, cfg.seq_length, heads, width).permute(0, 2, 1, 3)

    q, k, v = (per_head(dense(f"attention-self-{n}", x)) for n in ("query", "key", "value"))
    probs = torch.softmax(q @ k.transpose(-1, -2) / np.sqrt(width) + addr, dim=-1)
    context = (probs @ v).permute(0, 2, 1, 3).reshape(-1, cfg.hidden_size)
    attended = norm("attention-output-LayerNorm", dense("attention-output-dense", context) + x)
    inner = F.gelu(dense("intermediate-dense", attended))
    return norm("output-LayerNorm", dense("output-dense", inner) + attended)


def test_bert_encoder_layer_matches_pytorch():
    rng = np.random.default_rng(4)
    batch, h, inter = 2, CFG.hidden_size, CFG.intermediate_size
    x = rng.standard_normal((batch * CFG.seq_length, h)).astype(np.float32)
    mask = (np.arange(CFG.seq_length) < np.array([[CFG.seq_length], [11]])).astype(np.int32)
    params = {}
    for name, shape in [("attention-self-query", (h, h)), ("attention-self-key", (h, h)),
                        ("attention-self-value", (h, h)), ("attention-output-dense", (h, h)),
                        ("intermediate-dense", (h, inter)), ("output-dense", (inter, h))]:
        params[f"{name}-weight"] = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        params[f"{name}-bias"] = (rng.standard_normal(shape[1]) * 0.1).astype(np.float32)
    for name in ["attention-output-LayerNorm", "output-LayerNorm"]:
        params[f"{name}-gamma"] = rng.uniform(0.5, 1.5, h).astype(np.float32)
        params[f"{name}-beta"] = rng.uniform(-0.5, 0.5, h).astype(np.float32)
    cot = rng.standard_normal(x.shape).astype(np.float32)

    def build(xv):
        addr = bert.attention_addr(flow.constant(mask, dtype=flow.int32), CFG)
        return bert.encoder_layer(xv, addr, CFG)

    y, grads = _run_train_step(build, x, params, cot)

    tx = torch.tensor(x, requires_grad=True)
    tp_ = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    addr = (torch.tensor(mask, dtype=torch.float32).reshape(batch, 1, 1, -1) - 1.0) * 10000.0
    ty = _torch_encoder_layer(tx, addr, tp_, CFG)
    (ty * torch.tensor(cot)).sum().backward()
    _close(y, ty, "output")
    _close(grads["parity_input"], tx.grad, "input gradient")
    largest = max(float(t.grad.abs().max()) for t in tp_.values())
    for name, tensor in tp_.items():
        # the key's bias moves every score of a query alike, which the softmax cancels:
        # its gradient is zero up to rounding in both, so it is held to the largest one's
        scale = largest if name == "attention-self-key-bias" else None
        _close(grads[name], tensor.grad, f"gradient of {name}", scale)
