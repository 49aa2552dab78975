"""Wide&Deep as OneFlow's ``wdl_train_eval.py`` builds it: a wide embedding table summed
per example, a deep embedding table concatenated with the dense fields through relu layers,
``distribute`` hints and ``parallel_cast``, LazyAdam with the indexed-slices setting, and
``sigmoid_cross_entropy_with_logits`` on int32 click labels. A small vocabulary."""
import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from .zoo import assert_falls, losses_of

BATCH, DENSE, WIDE, DEEP = 16, 4, 3, 5
WIDE_VOCAB, DEEP_VOCAB, EMBEDDING = 50, 40, 4
DEEP_HIDDEN_UNITS = [16, 16]


def _model(dense_fields, wide_sparse_fields, deep_sparse_fields):
    wide_sparse_fields = flow.parallel_cast(wide_sparse_fields,
                                            distribute=flow.distribute.broadcast())
    wide_embedding_table = flow.get_variable(
        name="wide_embedding", shape=(WIDE_VOCAB, 1),
        initializer=flow.random_uniform_initializer(minval=-0.05, maxval=0.05),
        distribute=flow.distribute.split(0))
    wide_embedding = flow.gather(params=wide_embedding_table, indices=wide_sparse_fields)
    wide_embedding = flow.reshape(wide_embedding, shape=(
        -1, wide_embedding.shape[-1] * wide_embedding.shape[-2]))
    wide_scores = flow.math.reduce_sum(wide_embedding, axis=[1], keepdims=True)
    wide_scores = flow.parallel_cast(wide_scores, distribute=flow.distribute.split(0),
                                     gradient_distribute=flow.distribute.broadcast())
    deep_embedding_table = flow.get_variable(
        name="deep_embedding", shape=(DEEP_VOCAB, EMBEDDING),
        initializer=flow.random_uniform_initializer(minval=-0.05, maxval=0.05),
        distribute=flow.distribute.split(1))
    deep_embedding = flow.gather(params=deep_embedding_table, indices=deep_sparse_fields)
    deep_embedding = flow.reshape(deep_embedding, shape=(
        -1, deep_embedding.shape[-1] * deep_embedding.shape[-2]))
    deep_features = flow.concat([deep_embedding, dense_fields], axis=1)
    for idx, units in enumerate(DEEP_HIDDEN_UNITS):
        deep_features = flow.layers.dense(
            deep_features, units=units, kernel_initializer=flow.glorot_uniform_initializer(),
            bias_initializer=flow.constant_initializer(0.0), activation=flow.math.relu,
            name="fc" + str(idx + 1))
        deep_features = flow.nn.dropout(deep_features, rate=0.1)
    deep_scores = flow.layers.dense(
        deep_features, units=1, kernel_initializer=flow.glorot_uniform_initializer(),
        bias_initializer=flow.constant_initializer(0.0),
        name="fc" + str(len(DEEP_HIDDEN_UNITS) + 1))
    return wide_scores + deep_scores


def _get_train_conf():
    train_conf = flow.FunctionConfig()
    train_conf.default_data_type(flow.float)
    train_conf.indexed_slices_optimizer_conf(
        dict(include_op_names=dict(op_name=["wide_embedding", "deep_embedding"])))
    return train_conf


def train_job():
    """The script's train job: ``(labels, dense_fields, wide_sparse_fields,
    deep_sparse_fields)`` -> the per-sample losses; LazyAdam at 0.01."""
    @flow.global_function("train", _get_train_conf())
    def train_job(labels: tp.Numpy.Placeholder((BATCH, 1), dtype=flow.int32),
                  dense_fields: tp.Numpy.Placeholder((BATCH, DENSE), dtype=flow.float),
                  wide_sparse_fields: tp.Numpy.Placeholder((BATCH, WIDE), dtype=flow.int32),
                  deep_sparse_fields: tp.Numpy.Placeholder((BATCH, DEEP), dtype=flow.int32),
                  ) -> tp.Numpy:
        logits = _model(dense_fields, wide_sparse_fields, deep_sparse_fields)
        loss = flow.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.01])
        flow.optimizer.LazyAdam(lr_scheduler).minimize(loss)
        return loss
    return train_job


def inputs(seed=0):
    """A fixed batch: ``(labels, dense_fields, wide_sparse_fields, deep_sparse_fields)``."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 2, (BATCH, 1)).astype(np.int32),
            rng.standard_normal((BATCH, DENSE)).astype(np.float32),
            rng.integers(0, WIDE_VOCAB, (BATCH, WIDE)).astype(np.int32),
            rng.integers(0, DEEP_VOCAB, (BATCH, DEEP)).astype(np.int32))


def test_wide_and_deep_trains_on_int_click_labels():
    flow.config.collective_boxing.nccl_enable_all_to_all(True)
    assert_falls(losses_of(train_job(), *inputs(), steps=8))


def test_sigmoid_cross_entropy_labels_must_match_the_logits_shape():
    @flow.global_function(type="predict")
    def job(logits: tp.Numpy.Placeholder((4, 1)),
            labels: tp.Numpy.Placeholder((4,), dtype=flow.int32)) -> tp.Numpy:
        return flow.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    with pytest.raises(ValueError, match=r"labels must have the shape of logits \(4, 1\), "
                                         r"got \(4,\)"):
        job(np.zeros((4, 1), np.float32), np.zeros(4, np.int32))
