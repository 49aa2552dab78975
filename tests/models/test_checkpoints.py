"""Checkpoints of the zoo's other models (ResNet-50's is in test_resnet.py) in OneFlow's
on-disk layout, loaded back bit for bit: one folder per variable named as OneFlow names it
(namespaces included), its raw bytes in ``out`` beside a ``meta``, ``snapshot_done`` at the
end; a fresh session (other initial weights) that loads it predicts the same values.
Predict jobs only (no training) keep it cheap: the layout does not depend on the values."""
import os

import numpy as np
import pytest

import aioflow as flow
import aioflow.typing as tp

from . import bert
from .test_cnns import alexnet, inception_v3, mobilenet_v2, vgg16_bn
from .test_dcgan import BATCH as GAN_BATCH, Z_DIM, generator
from .test_wide_and_deep import DEEP, DENSE, WIDE, _model as wide_and_deep

CFG = bert.BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _cnn(model, size):
    def job(images: tp.Numpy.Placeholder((2, 3, size, size))) -> tp.Numpy:
        return model(images)
    rng = np.random.default_rng(0)
    return job, [rng.standard_normal((2, 3, size, size)).astype(np.float32)]


def _bert():
    s = CFG.seq_length

    def job(ids: tp.Numpy.Placeholder((2, s), dtype=flow.int32),
            mask: tp.Numpy.Placeholder((2, s), dtype=flow.int32),
            segments: tp.Numpy.Placeholder((2, s), dtype=flow.int32)) -> tp.Numpy:
        sequence, _ = bert.backbone(ids, mask, segments, CFG)
        return bert.pooled_output(sequence, CFG)
    rng = np.random.default_rng(0)
    return job, [rng.integers(0, CFG.vocab_size, (2, s)).astype(np.int32),
                 np.ones((2, s), np.int32), np.zeros((2, s), np.int32)]


def _wide_and_deep():
    def job(dense: tp.Numpy.Placeholder((4, DENSE)),
            wide: tp.Numpy.Placeholder((4, WIDE), dtype=flow.int32),
            deep: tp.Numpy.Placeholder((4, DEEP), dtype=flow.int32)) -> tp.Numpy:
        return wide_and_deep(dense, wide, deep)
    rng = np.random.default_rng(0)
    return job, [rng.standard_normal((4, DENSE)).astype(np.float32),
                 rng.integers(0, 10, (4, WIDE)).astype(np.int32),
                 rng.integers(0, 10, (4, DEEP)).astype(np.int32)]


def _dcgan():
    def job(z: tp.Numpy.Placeholder((GAN_BATCH, Z_DIM))) -> tp.Numpy:
        return generator(z)
    return job, [np.random.default_rng(0).standard_normal((GAN_BATCH, Z_DIM))
                 .astype(np.float32)]


MODELS = {
    "alexnet": (lambda: _cnn(alexnet, 67), "conv1-weight"),
    "vgg16_bn": (lambda: _cnn(vgg16_bn, 32), "conv5_3_bn-moving_variance"),
    "mobilenet_v2": (lambda: _cnn(mobilenet_v2, 64), None),
    "inception_v3": (lambda: _cnn(inception_v3, 75), "mixed_0-branch1x1-conv0-weight"),
    "bert": (_bert, "bert-encoder-layer_1-output-LayerNorm-gamma"),
    "wide_and_deep": (_wide_and_deep, "deep_embedding"),
    "dcgan": (_dcgan, "g_deconv3-weight"),
}


@pytest.mark.filterwarnings("ignore:conv2d_transpose. output_shape:RuntimeWarning")
@pytest.mark.parametrize("model", sorted(MODELS))
def test_checkpoint_in_oneflows_layout_loads_back_bit_for_bit(model, tmp_path):
    make, expected_name = MODELS[model]
    body, inputs = make()
    before = flow.global_function(type="predict")(body)(*inputs)
    saved = flow.get_all_variables()
    if expected_name is not None:
        assert expected_name in saved, sorted(saved)[:20]
    path = tmp_path / "snapshot"
    flow.checkpoint.save(str(path))
    assert os.path.isfile(path / "snapshot_done")
    for name, value in saved.items():
        folder = path / name
        assert os.path.getsize(folder / "out") == value.nbytes, name
        assert os.path.isfile(folder / "meta"), name
        assert np.fromfile(folder / "out", value.dtype).tobytes() == value.tobytes(), name

    flow.clear_default_session()
    flow.random.seed(123)                      # other initial values, overwritten by the load
    job = flow.global_function(type="predict")(make()[0])
    flow.load_variables(flow.checkpoint.get(str(path)))
    loaded = flow.get_all_variables()
    assert set(loaded) == set(saved)
    for name, value in loaded.items():
        assert value.dtype == saved[name].dtype and value.tobytes() == saved[name].tobytes(), name
    np.testing.assert_array_equal(job(*inputs), before)
