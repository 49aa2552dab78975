"""flow.summary writes TensorBoard event files: read back with TensorBoard's own loader
(the program users point at them), checking tags, steps and values."""
import numpy as np
import pytest
from PIL import Image
import io

import aioflow as flow
import aioflow.typing as tp
from aioflow.summary import writer as summary_writer

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator")


@pytest.fixture(autouse=True)
def fresh(tmp_path):
    flow.clear_default_session()
    yield
    summary_writer.close()
    flow.clear_default_session()


def _events(logdir):
    flow.sync_default_session()
    summary_writer.flush()
    acc = event_accumulator.EventAccumulator(str(logdir), size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0,
        event_accumulator.IMAGES: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    return acc


def _tag(text):
    return np.frombuffer(text.encode("ascii"), np.int8)


def test_scalar_and_histogram_ops_write_every_step_of_a_job(tmp_path):
    @flow.global_function(type="predict")
    def create_writer() -> None:
        flow.summary.create_summary_writer(str(tmp_path))

    @flow.global_function(type="predict")
    def log_job(x: tp.Numpy.Placeholder((2, 3)),
                step: tp.Numpy.Placeholder((1,), dtype=flow.int64),
                tag: tp.Numpy.Placeholder((4,), dtype=flow.int8)) -> tp.Numpy:
        mean = flow.math.reduce_mean(x)
        flow.summary.scalar(mean, step, tag)              # OneFlow's form: a tag blob
        flow.summary.histogram(x, step, "weights")       # aioflow also takes a str
        return mean

    create_writer()
    rng = np.random.default_rng(0)
    batches = [rng.normal(size=(2, 3)).astype(np.float32) for _ in range(4)]
    for i, x in enumerate(batches):
        log_job(x, np.array([10 * i]), _tag("loss"))
    acc = _events(tmp_path)
    scalars = acc.Scalars("loss")
    assert [s.step for s in scalars] == [0, 10, 20, 30]
    np.testing.assert_allclose([s.value for s in scalars], [x.mean() for x in batches],
                               rtol=1e-6)
    histograms = acc.Histograms("weights")
    assert [h.step for h in histograms] == [0, 10, 20, 30]
    for h, x in zip(histograms, batches):
        assert h.histogram_value.num == 6
        np.testing.assert_allclose(h.histogram_value.sum, x.sum(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose([h.histogram_value.min, h.histogram_value.max],
                                   [x.min(), x.max()], rtol=1e-6)


def test_image_op_writes_pngs_that_decode_to_the_pixels(tmp_path):
    flow.summary.create_summary_writer(tmp_path)

    @flow.global_function(type="predict")
    def image_job(images: tp.Numpy.Placeholder((2, 4, 5, 3), dtype=flow.uint8)) -> None:
        flow.summary.image(images, step=7, tag="samples")

    pixels = np.arange(2 * 4 * 5 * 3, dtype=np.uint8).reshape(2, 4, 5, 3)
    image_job(pixels)
    images = _events(tmp_path).Images("samples")
    assert [i.step for i in images] == [7]
    assert (images[0].width, images[0].height) == (5 * 2, 4) or (images[0].width,
                                                                  images[0].height) == (5, 8)
    decoded = np.asarray(Image.open(io.BytesIO(images[0].encoded_image_string)))
    # tensorboardX tiles a batch of images into one grid: both images appear in it
    for picture in pixels:
        assert any(np.array_equal(decoded[r:r + 4, c:c + 5, :3], picture)
                   for r in range(decoded.shape[0] - 3) for c in range(decoded.shape[1] - 4))


def test_text_and_hparams_through_pb_as_oneflow_wrote_them(tmp_path):
    flow.summary.create_summary_writer(tmp_path)

    @flow.global_function(type="predict")
    def pb_job(value: tp.Numpy.Placeholder((1500,), dtype=flow.int8),
               step: tp.Numpy.Placeholder((1,), dtype=flow.int64)) -> None:
        flow.summary.pb(value, step=step)

    def padded(summary):   # OneFlow's users passed np.fromstring(str(pb), np.int8)
        data = np.frombuffer(str(summary).encode(), np.int8)
        return np.concatenate([data, np.zeros(1500 - len(data), np.int8)])

    pb_job(padded(flow.summary.text(["vgg16", "resnet50"])), np.array([3]))
    hparams = {
        flow.summary.HParam("learning_rate", flow.summary.RealRange(1e-2, 1e-1)): 0.02,
        flow.summary.HParam("dense_layers", flow.summary.IntegerRange(2, 7)): 5,
        flow.summary.HParam("optimizer", flow.summary.ValueSet(["adam", "sgd"])): "adam",
        flow.summary.Metric("loss", float): 0.25,
        "dropout": 0.6,
    }
    pb_job(padded(flow.summary.hparams(hparams)), np.array([4]))
    acc = _events(tmp_path)
    texts = acc.Tensors("text")
    assert [t.step for t in texts] == [3]
    assert list(texts[0].tensor_proto.string_val) == [b"vgg16", b"resnet50"]
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == [(4, 0.25)]
    plugin = acc.PluginTagToContent("hparams")
    from tensorboard.plugins.hparams import plugin_data_pb2
    start = plugin_data_pb2.HParamsPluginData.FromString(
        plugin["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["learning_rate"].number_value == pytest.approx(0.02)
    assert start.hparams["dense_layers"].number_value == 5
    assert start.hparams["optimizer"].string_value == "adam"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(
        plugin["_hparams_/experiment"]).experiment
    infos = {i.name: i for i in experiment.hparam_infos}
    assert (infos["dense_layers"].domain_interval.min_value,
            infos["dense_layers"].domain_interval.max_value) == (2, 7)
    assert [v.string_value for v in infos["optimizer"].domain_discrete.values] == ["adam", "sgd"]
    assert [m.name.tag for m in experiment.metric_infos] == ["loss"]


def test_outside_a_job_values_are_written_at_once(tmp_path):
    flow.summary.create_summary_writer(tmp_path)
    for step, value in enumerate([0.5, 0.25]):
        flow.summary.scalar(value, step, "accuracy")
    flow.summary.pb(flow.summary.text(["hello"], tag="note"), step=1)
    flow.summary.flush_summary_writer()
    acc = _events(tmp_path)
    assert [(s.step, s.value) for s in acc.Scalars("accuracy")] == [(0, 0.5), (1, 0.25)]
    assert list(acc.Tensors("note")[0].tensor_proto.string_val) == [b"hello"]


def test_graph_writes_the_compiled_jobs(tmp_path):
    @flow.global_function(type="predict")
    def mlp(x: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        return flow.nn.relu(flow.layers.dense(x, 2, name="fc"))

    mlp(np.zeros((4, 3), np.float32))
    graph = flow.summary.Graph(str(tmp_path))
    graph.write_structure_graph()
    assert graph.structure_graph_filename.startswith(str(tmp_path / "graph"))
    graph_def = _events(tmp_path / "graph").Graph()
    nodes = {n.name: n for n in graph_def.node}
    assert "mlp/x" in nodes and nodes["mlp/x"].op == "placeholder"
    relu = [n for n in graph_def.node if n.op == "relu"]
    assert len(relu) == 1 and relu[0].input[0].startswith("mlp/fc")
    with pytest.raises(OSError, match="written already"):
        graph.write_structure_graph()


def test_projector_writes_points_and_labels(tmp_path):
    projector = flow.summary.Projector(str(tmp_path))
    projector.create_embedding_projector()
    points = np.arange(12, dtype=np.float32).reshape(4, 3)
    projector.embedding_projector(value=points, label=np.array([0, 1, 1, 0]), step=2,
                                  tag="emb", sample_type="image",
                                  x=np.zeros((4, 6, 6, 3), np.uint8))
    tsv = list((tmp_path / "projector").rglob("tensors.tsv"))
    assert len(tsv) == 1
    np.testing.assert_allclose(np.loadtxt(tsv[0], ndmin=2), points)
    meta = (tsv[0].parent / "metadata.tsv").read_text().split()
    assert meta == ["0", "1", "1", "0"]


def test_errors_name_the_argument(tmp_path):
    with pytest.raises(RuntimeError, match="create_summary_writer"):
        flow.summary.scalar(1.0, 0, "loss")
    flow.summary.create_summary_writer(tmp_path)

    def job(x: tp.Numpy.Placeholder((2,))) -> None:
        flow.summary.scalar(x, 0, "two")

    with pytest.raises(ValueError, match="value must hold one element"):
        flow.global_function(type="predict")(job)(np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="tag must be a str"):
        flow.summary.scalar(1.0, 0, 3)
    with pytest.raises(TypeError, match="min_value must be a int"):
        flow.summary.IntegerRange(0.5, 2)
    with pytest.raises(ValueError, match="must not exceed"):
        flow.summary.RealRange(2.0, 1.0)
    with pytest.raises(TypeError, match="every value must be a str"):
        flow.summary.ValueSet(["a", 1])
    with pytest.raises(ValueError, match="dtype must be an IntegerRange"):
        flow.summary.HParam("lr", float)
    with pytest.raises(TypeError, match="metric 'loss' must be a number"):
        flow.summary.hparams({flow.summary.Metric("loss"): "high"})
    with pytest.raises(ValueError, match="neither the text form"):
        flow.summary.pb(np.frombuffer(b"\xff\xfe garbage", np.int8), step=0)
    with pytest.raises(ValueError, match=r"value must be \(N, H, W, C\)"):
        flow.summary.image(np.zeros((4, 4), np.uint8))
