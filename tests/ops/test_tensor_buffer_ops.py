"""Tensor buffers and tensor lists (issue 18): ``flow.record`` / ``flow.tensor_buffer`` and
the five conversion ops, against numpy slicing as the reference.

The OneFlow tests of these ops (test_tensor_buffer_ops.py, test_tensor_list_input_output,
test_tensor_list_split) run here with the import swapped: the same jobs, the same checks.
Results are exact copies, so they are compared exactly. This module also runs on the
strict backend (tests/backends/test_strict_suite.py), where dense values are device arrays.
"""

import pickle
from typing import Tuple

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp
from aioflow.ops import REGISTRY
from aioflow.ops.registry import MissingKernelError

OPS = ("tensor_to_tensor_buffer", "tensor_buffer_to_tensor", "tensor_buffer_to_tensor_list",
       "tensor_list_to_tensor_buffer", "tensor_list_split")


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


# -- the dtypes -------------------------------------------------------------------------------
def test_record_and_tensor_buffer_are_dtypes_but_not_numbers():
    for dtype in (flow.record, flow.tensor_buffer):
        assert isinstance(dtype, flow.DType) and not dtype.is_numeric
        assert not dtype.is_floating
        assert pickle.loads(pickle.dumps(dtype)) is dtype
    assert flow.float32.is_numeric and flow.uint8.is_numeric
    assert flow.record is not flow.tensor_buffer


@pytest.mark.parametrize("dtype", [flow.record, flow.tensor_buffer])
def test_a_placeholder_of_a_host_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match=f"dtype must be a numeric.*got flow.{dtype.name}"):
        tp.Numpy.Placeholder((4,), dtype=dtype)
    with pytest.raises(TypeError, match="numeric flow data type"):
        flow.convert_oneflow_dtype_to_numpy_dtype(dtype)


def test_the_ofrecord_reader_reports_the_record_dtype(tmp_path):
    folder = str(tmp_path / "records")
    flow.data.ofrecord.write_ofrecord(folder, [{"x": np.float32(i)} for i in range(4)])
    seen = {}

    @flow.global_function(type="predict")
    def read_job() -> tp.Numpy:
        records = flow.data.ofrecord_reader(folder, batch_size=2)
        seen["dtype"], seen["shape"] = records.dtype, records.shape
        return flow.data.OFRecordRawDecoder(records, "x", shape=(), dtype=flow.float)

    assert read_job().tolist() == [0.0, 1.0]
    assert seen == {"dtype": flow.record, "shape": (2,)}


# -- tensor <-> tensor buffer -------------------------------------------------------------------
@pytest.mark.parametrize("shape, instance_dims", [((4, 16, 6, 6), 2), ((3, 5), 1),
                                                  ((2, 3, 4), 0), ((2, 3, 4), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_a_tensor_survives_the_round_trip_through_a_buffer(shape, instance_dims, dtype):
    instance_shape = shape[len(shape) - instance_dims:]

    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder(shape, dtype=flow.dtypes.from_numpy(dtype))
            ) -> Tuple[tp.Numpy, tp.Numpy]:
        buffers = flow.tensor_to_tensor_buffer(x, instance_dims=instance_dims)
        assert buffers.dtype is flow.tensor_buffer
        assert buffers.shape == shape[:len(shape) - instance_dims]
        dense = flow.tensor_buffer_to_tensor(buffers, dtype=flow.dtypes.from_numpy(dtype),
                                             instance_shape=instance_shape)
        return dense, buffers

    x = (np.random.default_rng(0).uniform(0, 100, shape)).astype(dtype)
    dense, buffers = job(x)
    assert dense.dtype == dtype and np.array_equal(dense, x)
    # A buffer returned from the job: an object array of the instances, each a copy.
    assert buffers.dtype == object and buffers.shape == shape[:len(shape) - instance_dims]
    for index in np.ndindex(buffers.shape):
        assert buffers[index].dtype == dtype and np.array_equal(buffers[index], x[index])


def test_converting_a_buffer_checks_every_instance():
    @flow.global_function(type="predict")
    def wrong_shape(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        buffers = flow.tensor_to_tensor_buffer(x, instance_dims=1)
        return flow.tensor_buffer_to_tensor(buffers, dtype=flow.float, instance_shape=(4,))

    with pytest.raises(ValueError, match=r"element \(0,\) of x holds a float32 tensor of "
                                         r"shape \(3,\), expected float32 of instance_shape"):
        wrong_shape(np.zeros((2, 3), np.float32))

    @flow.global_function(type="predict")
    def wrong_dtype(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        buffers = flow.tensor_to_tensor_buffer(x, instance_dims=1)
        return flow.tensor_buffer_to_tensor(buffers, dtype=flow.int32, instance_shape=(3,))

    with pytest.raises(ValueError, match="holds a float32 tensor.*expected int32"):
        wrong_dtype(np.zeros((2, 3), np.float32))


def test_bad_arguments_are_refused_when_the_job_is_traced():
    def trace(body):
        flow.clear_default_session()

        @flow.global_function(type="predict")
        def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
            return body(x)
        job(np.zeros((2, 3), np.float32))

    with pytest.raises(ValueError, match=r"instance_dims must lie in \[0, 2\).*got 2"):
        trace(lambda x: flow.tensor_to_tensor_buffer(x, instance_dims=2))
    with pytest.raises(TypeError, match="instance_dims must be an int, got True"):
        trace(lambda x: flow.tensor_to_tensor_buffer(x, instance_dims=True))
    with pytest.raises(TypeError, match="flow.tensor_to_tensor_buffer: x must be a Blob"):
        trace(lambda x: flow.tensor_to_tensor_buffer(np.zeros(3), instance_dims=0))
    with pytest.raises(TypeError, match="x must be a numeric Blob.*got a tensor_buffer"):
        trace(lambda x: flow.tensor_to_tensor_buffer(flow.tensor_to_tensor_buffer(x, 1), 0))
    with pytest.raises(TypeError, match="x must be a tensor_buffer Blob.*got a float32"):
        trace(lambda x: flow.tensor_buffer_to_tensor(x, flow.float, (3,)))
    with pytest.raises(TypeError, match="dtype must be a numeric.*flow.tensor_buffer"):
        trace(lambda x: flow.tensor_buffer_to_tensor(flow.tensor_to_tensor_buffer(x, 1),
                                                     flow.tensor_buffer, (3,)))
    with pytest.raises(ValueError, match="instance_shape must be a tuple of ints"):
        trace(lambda x: flow.tensor_buffer_to_tensor(flow.tensor_to_tensor_buffer(x, 1),
                                                     flow.float, (-1,)))
    with pytest.raises(ValueError, match="input must be a 1-d tensor buffer"):
        trace(lambda x: flow.tensor_buffer_to_tensor_list(flow.tensor_to_tensor_buffer(x, 0),
                                                          (3,), flow.float))
    with pytest.raises(TypeError, match="input_tensor_list must be a tensor list"):
        trace(lambda x: flow.tensor_list_split(x))
    with pytest.raises(TypeError, match="input must be a tensor list"):
        trace(lambda x: flow.tensor_list_to_tensor_buffer(x))


# -- numeric ops refuse host values ------------------------------------------------------------
@pytest.mark.parametrize("use", [lambda b: b + 1, flow.math.reduce_sum, flow.nn.relu,
                                 lambda b: flow.cast(b, flow.float)],
                         ids=["add", "reduce_sum", "relu", "cast"])
def test_math_on_a_tensor_buffer_names_the_op_and_the_blob(use):
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return use(flow.tensor_to_tensor_buffer(x, instance_dims=1, name="buffers"))

    with pytest.raises(TypeError, match="op [a-z_]+: input 'buffers' must be a numeric Blob "
                                        r"\(float, int...\), got a tensor_buffer Blob; "
                                        "convert it with flow.tensor_buffer_to_tensor"):
        job(np.zeros((2, 3), np.float32))


def test_ops_refuse_tensor_lists_and_split_results():
    @flow.global_function(type="predict")
    def on_split(x: tp.ListListNumpy.Placeholder((2, 5, 4))) -> tp.Numpy:
        return flow.tensor_list_split(x)[0] * 2

    with pytest.raises(TypeError, match="op multiply: input 'tensor_list_split:0' is a "
                                        "tensor of data-dependent shape"):
        on_split([[np.zeros((1, 5, 4), np.float32), np.zeros((1, 4, 4), np.float32)]])

    @flow.global_function(type="predict")
    def on_list(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        buffers = flow.tensor_to_tensor_buffer(x, instance_dims=1)
        return flow.math.exp(flow.tensor_buffer_to_tensor_list(buffers, (3,), flow.float))

    with pytest.raises(TypeError, match="op exp: input .* is a tensor list"):
        on_list(np.zeros((2, 3), np.float32))


def test_a_tensor_list_is_returned_as_list_list_numpy_only():
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        buffers = flow.tensor_to_tensor_buffer(x, instance_dims=1)
        return flow.tensor_buffer_to_tensor_list(buffers, (3,), flow.float)

    with pytest.raises(TypeError, match="is a tensor list .*annotate it tp.ListListNumpy"):
        job(np.zeros((2, 3), np.float32))


def test_a_tensor_list_argument_for_a_dense_use_is_refused():
    @flow.global_function(type="predict")
    def job(x: tp.ListListNumpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.math.square(x)

    dense = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(job([[dense]]), dense ** 2)     # one dense array, as before
    with pytest.raises(ValueError, match="argument 'x' is a tensor list of 2 arrays, but the "
                                         r"job gives it to op square.*\[\[array of shape"):
        job([[np.zeros((1, 3), np.float32), np.zeros((1, 2), np.float32)]])


@pytest.mark.parametrize("items, message", [
    ([np.zeros((1, 6, 4))], r"item 0 of the tensor list has shape \(1, 6, 4\)"),
    ([np.zeros((5, 4))], r"item 0 of the tensor list has shape \(5, 4\); each must have 3"),
    ([np.zeros((2, 5, 4)), np.zeros((1, 5, 4))], "the tensor list.s leading dimensions add up to 3"),
])
def test_tensor_list_arguments_must_fit_the_static_shape(items, message):
    @flow.global_function(type="predict")
    def job(x: tp.ListListNumpy.Placeholder((2, 5, 4))) -> tp.ListListNumpy:
        buffers = flow.tensor_list_to_tensor_buffer(x)
        return flow.tensor_buffer_to_tensor_list(buffers, (5, 4), flow.float)

    with pytest.raises(ValueError, match=f"job\\(\\) argument 'x': {message}"):
        job([items])


# -- tensor lists: OneFlow's tests, import swapped ---------------------------------------------
def test_tensor_list_input_output():
    """OneFlow's test_tensor_list_input_output: list -> buffer -> list."""
    input_0 = np.random.rand(1, 5, 4).astype(np.single)
    input_1 = np.random.rand(1, 4, 4).astype(np.single)

    @flow.global_function(type="predict")
    def foo_job(input_def: tp.ListListNumpy.Placeholder(shape=(2, 5, 4), dtype=flow.float)
                ) -> tp.ListListNumpy:
        tensor_buffer = flow.tensor_list_to_tensor_buffer(input_def)
        return flow.tensor_buffer_to_tensor_list(tensor_buffer, shape=(5, 4), dtype=flow.float)

    ndarray_lists = foo_job([[input_0, input_1]])
    assert isinstance(ndarray_lists, list) and len(ndarray_lists) == 1
    ndarray_list = ndarray_lists[0]
    assert len(ndarray_list) == 2
    assert np.array_equal(ndarray_list[0], input_0)
    assert np.array_equal(ndarray_list[1], input_1)


def test_tensor_list_split():
    """OneFlow's test_tensor_list_split: random lengths along axis 1."""
    rng = np.random.default_rng(7)
    static = (3, 5, 4)
    inputs = [rng.random((1, int(rng.integers(1, 5)), 4)).astype(np.single) for _ in range(3)]

    @flow.global_function(type="predict")
    def split_job(input_def: tp.ListListNumpy.Placeholder(shape=static, dtype=flow.float)
                  ) -> Tuple[tp.ListNumpy, tp.ListNumpy, tp.ListNumpy]:
        return flow.tensor_list_split(input_def)

    outputs = split_job([inputs])
    for given, got in zip(inputs, outputs, strict=True):
        assert np.array_equal(got[0], given.squeeze(0))
    # A second call with other shapes: the shapes follow the data, not the first call.
    again = [rng.random((1, 5, 4)).astype(np.single) for _ in range(3)]
    assert [o[0].shape for o in split_job([again])] == [(5, 4)] * 3


def test_tensor_buffer_to_tensor_list_casts_and_checks_each_tensor():
    """OneFlow's docstring example (smaller), plus the cast to the list's dtype."""
    @flow.global_function(type="predict")
    def job(x: tp.Numpy.Placeholder(shape=(4, 3, 2, 2))) -> tp.ListListNumpy:
        buffers = flow.tensor_to_tensor_buffer(x, instance_dims=3)
        return flow.tensor_buffer_to_tensor_list(buffers, shape=(3, 2, 2), dtype=flow.int32)

    x = np.random.default_rng(3).uniform(-9, 9, (4, 3, 2, 2)).astype(np.float32)
    (tensors,) = job(x)
    assert len(tensors) == 4
    for i, tensor in enumerate(tensors):
        assert tensor.dtype == np.int32 and tensor.shape == (1, 3, 2, 2)
        assert np.array_equal(tensor[0], x[i].astype(np.int32))   # truncation, as C's cast

    @flow.global_function(type="predict")
    def too_big(x: tp.Numpy.Placeholder(shape=(2, 3))) -> tp.ListListNumpy:
        buffers = flow.tensor_to_tensor_buffer(x, instance_dims=1)
        return flow.tensor_buffer_to_tensor_list(buffers, shape=(2,), dtype=flow.float)

    with pytest.raises(ValueError, match=r"element \(0,\) of input holds a tensor of shape "
                                         r"\(3,\), which does not fit shape \(2,\)"):
        too_big(np.zeros((2, 3), np.float32))


def test_a_tensor_list_must_fill_its_static_length():
    @flow.global_function(type="predict")
    def job(x: tp.ListListNumpy.Placeholder((3, 5, 4))) -> Tuple[tp.ListNumpy, ...]:
        return flow.tensor_list_split(x)

    with pytest.raises(ValueError, match="the tensor list holds 2 tensors, expected 3"):
        job([[np.zeros((1, 5, 4), np.float32), np.zeros((1, 4, 4), np.float32)]])


# -- gradients and backends --------------------------------------------------------------------
def test_no_gradient_flows_through_a_tensor_buffer():
    """OneFlow registers no gradient for these ops: a variable reached only through them
    is left alone by the optimizer, one reached directly is trained."""
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        through = flow.get_variable("through", shape=(2, 3), initializer=flow.ones_initializer())
        direct = flow.get_variable("direct", shape=(2, 3), initializer=flow.ones_initializer())
        buffers = flow.tensor_to_tensor_buffer(through * x, instance_dims=1)
        y = flow.tensor_buffer_to_tensor(buffers, dtype=flow.float, instance_shape=(3,))
        loss = flow.math.reduce_sum(y + direct * x)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]),
                           momentum=0).minimize(loss)
        return loss

    train(np.ones((2, 3), np.float32))
    values = flow.get_all_variables()
    assert np.array_equal(values["through"], np.ones((2, 3), np.float32))
    assert not np.array_equal(values["direct"], np.ones((2, 3), np.float32))


def test_the_kernels_run_where_devices_pass_host_values_through():
    """numpy, strict and CuPy stage a tensor buffer as it is (it stays on the host); a
    backend that does not has no kernel for these ops."""
    for name in OPS:
        op = REGISTRY[name]
        assert all(op.has_kernel(b) for b in ("numpy", "strict", "cupy"))
        assert not op.differentiable
        with pytest.raises(MissingKernelError, match=f"op '{name}' has no kernel for the "
                                                     "'other' backend"):
            op.kernel("other")


def test_the_old_api_tensor_list_tests_run_too():
    """OneFlow 0.2's forms of the tests: MirroredTensorListDef, ``.get()``, numpy_lists()."""
    input_0 = np.random.rand(1, 5, 4).astype(np.single)
    input_1 = np.random.rand(1, 4, 4).astype(np.single)

    @flow.global_function()
    def foo_job(input_def=flow.MirroredTensorListDef(shape=(2, 5, 4), dtype=flow.float)):
        tensor_buffer = flow.tensor_list_to_tensor_buffer(input_def)
        return flow.tensor_buffer_to_tensor_list(tensor_buffer, shape=(5, 4), dtype=flow.float)

    (got_0, got_1), = foo_job([[input_0, input_1]]).get().numpy_lists()
    assert np.array_equal(got_0, input_0) and np.array_equal(got_1, input_1)

    @flow.global_function()
    def split_job(input_def=flow.MirroredTensorListDef(shape=(2, 5, 4), dtype=flow.float)):
        return flow.tensor_list_split(input_def)

    outputs = split_job([[input_0, input_1]]).get()
    assert [o.ndarray_list()[0].shape for o in outputs] == [(5, 4), (4, 4)]
    assert np.array_equal(outputs[1].numpy_list()[0], input_1[0])
