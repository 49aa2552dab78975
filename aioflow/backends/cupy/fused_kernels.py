"""The CuPy backend's one-launch kernels for the fused ops (:mod:`aioflow.ops.fused`) and
for max pooling with its argmax. The generic ``xp`` kernels they stand for are tested on
numpy and on the strict backend; ``tests/backends/test_gpu_fusion.py`` (marked ``gpu``)
compares these with them, and passed on an H200 (issue 26). NVRTC compiles them without
the host's headers: their sources use none of ``<cmath>``'s macros (infinity, not a
number; tests/ops/test_cupy_kernel_sources.py checks).

Each kernel is compiled by CuPy at its first use (``ElementwiseKernel`` / ``RawKernel``),
so importing this module needs no CuPy. float32 and float64 only; other dtypes take the
generic kernel.

* ``bias_add_relu``: one elementwise kernel (the generic one is an add, then a maximum);
* ``sparse_softmax_cross_entropy_train``: one thread per row writes the loss and the
  logits' gradient (the generic path: the forward kernel, then the gradient kernel);
* ``multi_*_update``: one launch updates every variable. The kernel's source is generated
  for the list of tensor sizes (one pointer argument per array, the sizes compiled in), so
  no pointer table is copied to the device: a CUDA graph capturing it keeps plain kernel
  arguments (the step's variables keep their addresses; its gradients come from the
  graph's private pool, fixed at capture);
* ``max_pool2d`` / ``max_pool2d_grad``: one thread per output (the first maximum of its
  window in row-major order, as the generic kernel picks it) and one per input element
  (summing the gradients of the windows that chose it).
"""
from __future__ import annotations

import functools

import numpy as np

from ...ops import fused
from ...ops.conv import max_pool2d_grad, max_pool2d_op
from .kernels import ROW_EXPONENTIALS
from ...ops.state import adamw_decay_rate
from ...kernels.pool import _PoolGeom, _argmax_dtype

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_C_TYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def _floats(*arrays) -> bool:
    return all(a.dtype in _FLOATS for a in arrays)


@functools.cache
def _elementwise() -> dict:
    import cupy
    kernel = cupy.ElementwiseKernel
    return {
        # relu as numpy's maximum(v, 0): NaN passes through.
        "bias_relu": kernel(
            "T x, raw T b, int64 inner, int64 channels", "T y",
            "T v = x + b[(i / inner) % channels]; y = (v > (T)0 || v != v) ? v : (T)0;",
            "aioflow_bias_add_relu"),
        "ce_train": kernel(
            "raw T logits, raw L labels, raw T gy, int32 classes", "T loss, raw T grad",
            ROW_EXPONENTIALS.replace("OUT", "grad") + """
            const long long label = (long long)labels[i];
            const T scale = gy[i];
            for (int c = 0; c < classes; ++c)
                grad[base + c] = (grad[base + c] / total - (c == label ? (T)1 : (T)0)) * scale;
            loss = (label < 0 || label >= classes)
                ? sqrt((T)-1) : log(total) - (logits[base + label] - top);
            """, "aioflow_sparse_softmax_ce_train"),
        "max_pool": kernel(
            "raw T x, int32 H, int32 W, int32 OH, int32 OW, int32 kh, int32 kw, int32 sh, "
            "int32 sw, int32 pt, int32 pl", "T y, A argmax",
            """
            const int ow = i % OW, oh = (i / OW) % OH;
            const long long plane = (long long)(i / (OW * OH)) * H * W;
            T best = (T)(-__longlong_as_double(0x7ff0000000000000LL));   // -inf (NVRTC has no cmath macro)
            int chosen = 0;
            for (int a = 0; a < kh; ++a) {
                const int h = oh * sh - pt + a;
                if (h < 0 || h >= H) continue;
                for (int b = 0; b < kw; ++b) {
                    const int w = ow * sw - pl + b;
                    if (w < 0 || w >= W) continue;
                    const T v = x[plane + (long long)h * W + w];
                    if (v > best) { best = v; chosen = a * kw + b; }
                }
            }
            y = best;
            argmax = (A)chosen;
            """, "aioflow_max_pool2d"),
        "max_pool_grad": kernel(
            "raw T dy, raw A argmax, int32 H, int32 W, int32 OH, int32 OW, int32 kh, "
            "int32 kw, int32 sh, int32 sw, int32 pt, int32 pl", "T dx",
            """
            const int w = i % W, h = (i / W) % H;
            const long long plane = (long long)(i / (W * H)) * OH * OW;
            T total = 0;
            for (int oh = max(0, (h + pt - kh + sh) / sh); oh < OH; ++oh) {
                const int a = h + pt - oh * sh;
                if (a < 0) break;
                if (a >= kh) continue;
                for (int ow = max(0, (w + pl - kw + sw) / sw); ow < OW; ++ow) {
                    const int b = w + pl - ow * sw;
                    if (b < 0) break;
                    if (b >= kw) continue;
                    const long long o = plane + (long long)oh * OW + ow;
                    if ((int)argmax[o] == a * kw + b) total += dy[o];
                }
            }
            dx = total;
            """, "aioflow_max_pool2d_grad"),
    }


@fused.bias_add_relu.kernel_for("cupy")
def _bias_add_relu(ctx, x, b, *, axis, out=None):
    if not _floats(x):
        return fused.bias_add_relu.forward(ctx, x, b, axis=axis, out=out)
    xp = ctx.xp
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    y = out if out is not None else xp.empty(x.shape, x.dtype)
    if y.size:
        _elementwise()["bias_relu"](x, b, np.int64(inner), np.int64(x.shape[axis]), y)
    return y


@fused.sparse_softmax_ce_train.kernel_for("cupy")
def _sparse_ce_train(ctx, labels, logits, gy):
    if not _floats(logits):
        return fused.sparse_softmax_ce_train.forward(ctx, labels, logits, gy)
    xp = ctx.xp
    logits = xp.ascontiguousarray(logits)
    loss = xp.empty(logits.shape[:-1], logits.dtype)
    grad = xp.empty(logits.shape, logits.dtype)
    if loss.size:
        _elementwise()["ce_train"](logits, xp.ascontiguousarray(labels),
                                   xp.ascontiguousarray(gy, dtype=logits.dtype),
                                   np.int32(logits.shape[-1]), loss, grad)
    return loss, grad


def _pool_geometry(x_shape, out_shape, ksize, strides, pads):
    (pt, _), (pl, _) = pads
    return [np.int32(v) for v in (x_shape[2], x_shape[3], out_shape[2], out_shape[3],
                                  ksize[0], ksize[1], strides[0], strides[1], pt, pl)]


@max_pool2d_op.kernel_for("cupy")
def _max_pool2d(ctx, x, *, ksize, strides, pads):
    if not _floats(x):
        return max_pool2d_op.forward(ctx, x, ksize=ksize, strides=strides, pads=pads)
    xp = ctx.xp
    g = _PoolGeom(x.shape, ksize, strides, pads, "max_pool2d")
    y = xp.empty((g.N, g.C, g.OH, g.OW), x.dtype)
    argmax = xp.empty(y.shape, _argmax_dtype(x.dtype, g.kh * g.kw))   # as the generic's
    if y.size:
        _elementwise()["max_pool"](xp.ascontiguousarray(x),
                                   *_pool_geometry(x.shape, y.shape, ksize, strides,
                                                   ((g.pt, g.pb), (g.pl, g.pr))), y, argmax)
    return y, argmax


@max_pool2d_grad.kernel_for("cupy")
def _max_pool2d_grad(ctx, dy, argmax, *, x_shape, ksize, strides, pads):
    if not _floats(dy):
        return max_pool2d_grad.forward(ctx, dy, argmax, x_shape=x_shape, ksize=ksize,
                                       strides=strides, pads=pads)
    xp = ctx.xp
    g = _PoolGeom(x_shape, ksize, strides, pads, "max_pool2d_backward")
    dx = xp.empty(tuple(x_shape), dy.dtype)
    if dx.size:
        _elementwise()["max_pool_grad"](xp.ascontiguousarray(dy), xp.ascontiguousarray(argmax),
                                        *_pool_geometry(x_shape, dy.shape, ksize, strides,
                                                        ((g.pt, g.pb), (g.pl, g.pr))), dx)
    return dx


# -- multi-tensor optimizer updates -----------------------------------------------------------

# Per variable: the statement updating element ``i`` of its arrays (``{p}``: the parameter,
# ``{g}``: its gradient, ``{s0}``, ``{s1}``: its slots), the single-variable kernels' math.
_UPDATE_BODIES = {
    "multi_sgd_update": ("", "{p}[i] -= ({g}[i] + {p}[i] * decay) * lr;"),
    "multi_momentum_update": (   # OneFlow's: the decay apart from the velocity
        ", T beta", "const T old = {p}[i]; {s0}[i] = {s0}[i] * beta - {g}[i] * lr; "
                    "{p}[i] = old + {s0}[i] - old * decay * lr;"),
    "multi_adam_update": (
        ", T b1, T omb1, T b2, T omb2, T inv_c2, T eps",
        "{p}[i] -= {p}[i] * decay; "
        "{s0}[i] = {s0}[i] * b1 + {g}[i] * omb1; "
        "{s1}[i] = {s1}[i] * b2 + {g}[i] * {g}[i] * omb2; "
        "{p}[i] -= {s0}[i] / (sqrt({s1}[i]) * inv_c2 + eps) * lr;"),
}


def multi_update_source(op_name: str, c_type: str, sizes: tuple, slots: int,
                        guarded: bool) -> str:
    """CUDA source of one multi-tensor update kernel for tensors of ``sizes`` (plain text,
    so tests check it without CuPy)."""
    extra_params, body = _UPDATE_BODIES[op_name]
    params = ["const signed char* ok"] if guarded else []
    params += ["T lr", "T decay"] + [p for p in extra_params.split(", ") if p]
    for t in range(len(sizes)):
        params += [f"T* p{t}", f"const T* g{t}"] + [f"T* s{s}_{t}" for s in range(slots)]
    lines = ["typedef " + c_type + " T;",
             f'extern "C" __global__ void aioflow_{op_name}({", ".join(params)}) {{',
             "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;"]
    if guarded:
        lines.append("    if (!ok[0]) return;")
    for t, size in enumerate(sizes):
        names = {"p": f"p{t}", "g": f"g{t}", **{f"s{s}": f"s{s}_{t}" for s in range(slots)}}
        lines.append(f"    if (i < {size}LL) {{ {body.format(**names)} return; }}")
        lines.append(f"    i -= {size}LL;")
    lines.append("}")
    return "\n".join(lines)


@functools.cache
def _multi_kernel(op_name, c_type, sizes, slots, guarded):
    import cupy
    return cupy.RawKernel(multi_update_source(op_name, c_type, sizes, slots, guarded),
                          f"aioflow_{op_name}")


def _register_multi_cupy(op_name: str, single_name: str):
    multi = getattr(fused, op_name)
    _, slots, reads_step = fused.MULTI_UPDATES[single_name]

    @multi.kernel_for("cupy")
    def kernel(ctx, *arrays, count, **attrs):
        params, grads, slot_arrays, lr, step, flag = fused.split_multi_inputs(
            arrays, count, slots, reads_step)
        dtype = params[0].dtype
        if attrs.get("sparse_rows") or dtype not in _FLOATS or any(
                p.dtype != dtype for p in params) or not all(
                a.flags.c_contiguous for a in (*params, *grads, *sum(slot_arrays, ()))):
            return multi.forward(ctx, *arrays, count=count, **attrs)
        t = dtype.type
        scalars = _scalars(single_name, float(lr), step, attrs, t)
        per_tensor = []
        for i in range(count):
            per_tensor += [params[i], grads[i].astype(dtype, copy=False)]
            per_tensor += [s[i] for s in slot_arrays]
        sizes = tuple(int(p.size) for p in params)
        total = sum(sizes)
        if not total:
            return
        kernel_ = _multi_kernel(op_name, _C_TYPE[dtype], sizes, slots, bool(flag))
        threads = 256
        kernel_(((total + threads - 1) // threads,), (threads,),
                (*flag, *scalars, *per_tensor))
    return kernel


def _scalars(single_name, lr, step, attrs, t) -> tuple:
    decay = t(attrs.get("weight_decay", 0.0))
    if single_name == "sgd_update":
        return t(lr), decay
    if single_name == "momentum_update":
        return t(lr), decay, t(attrs["beta"])
    beta1, beta2 = attrs["beta1"], attrs["beta2"]
    decay = t(adamw_decay_rate(lr, step, beta1, beta2, attrs["do_bias_correction"])
              * attrs.get("weight_decay", 0.0))   # decoupled, as the single kernel's
    inv_c2 = 1.0
    if attrs["do_bias_correction"]:
        n = float(step) + 1.0
        inv_c2 = 1.0 / (1 - beta2 ** n) ** 0.5
        lr = lr / (1 - beta1 ** n)
    return (t(lr), decay, t(beta1), t(1 - beta1), t(beta2), t(1 - beta2), t(inv_c2),
            t(attrs["epsilon"]))


for _single, (_multi, _, _) in fused.MULTI_UPDATES.items():
    _register_multi_cupy(_multi, _single)
