"""BERT pretraining (masked LM + next sentence) and the GLUE classifier, as OneFlow-
Benchmark's ``run_pretraining.py`` / ``run_classifier.py`` run them: the batch read from
an OFRecord data set by ``ofrecord_reader`` + ``OFRecordRawDecoder`` on the CPU, AdamW
with warm-up and polynomial decay, the classifier declaring its loss with
``flow.losses.add_loss`` and ``optimizer.minimize`` both. A tiny config (2 layers, hidden
32, 2 heads, seq 16, vocabulary 100); pretraining also on the strict backend."""
from __future__ import annotations

import numpy as np
import pytest

import aioflow as flow
from aioflow.data import ofrecord

from . import bert
from .zoo import assert_falls

CFG = bert.BertConfig()
BATCH = 8


def _sentences(rng, n):
    """Token ids, a mask whose tail is padding, and segment ids (the second sentence 1)."""
    ids = rng.integers(5, CFG.vocab_size, (n, CFG.seq_length)).astype(np.int32)
    lengths = rng.integers(CFG.seq_length // 2, CFG.seq_length + 1, n)
    mask = (np.arange(CFG.seq_length) < lengths[:, None]).astype(np.int32)
    segments = (np.arange(CFG.seq_length) >= lengths[:, None] // 2).astype(np.int32) * mask
    return ids * mask, mask, segments


def pretraining_records(n=BATCH, seed=0):
    rng = np.random.default_rng(seed)
    ids, mask, segments = _sentences(rng, n)
    records = []
    for i in range(n):
        positions = np.sort(rng.choice(np.flatnonzero(mask[i])[1:],
                                       CFG.max_predictions_per_seq, replace=False))
        weights = np.ones(CFG.max_predictions_per_seq, np.float32)
        weights[-1] = 0.0                                  # a padded prediction slot
        masked = ids[i].copy()
        masked[positions] = 3                              # [MASK]
        records.append({
            "input_ids": masked, "input_mask": mask[i], "segment_ids": segments[i],
            "masked_lm_ids": ids[i][positions].astype(np.int32),
            "masked_lm_positions": positions.astype(np.int32),
            "masked_lm_weights": weights,
            "next_sentence_labels": np.array([rng.integers(0, 2)], np.int32)})
    return records


def classifier_records(n=BATCH, seed=1):
    rng = np.random.default_rng(seed)
    ids, mask, segments = _sentences(rng, n)
    return [{"input_ids": ids[i], "input_mask": mask[i], "segment_ids": segments[i],
             "label_ids": np.array([i % 2], np.int32),
             "is_real_example": np.array([1], np.int32)} for i in range(n)]


PRETRAIN_FIELDS = {
    "input_ids": ([CFG.seq_length], flow.int32),
    "next_sentence_labels": ([1], flow.int32),
    "input_mask": ([CFG.seq_length], flow.int32),
    "segment_ids": ([CFG.seq_length], flow.int32),
    "masked_lm_ids": ([CFG.max_predictions_per_seq], flow.int32),
    "masked_lm_positions": ([CFG.max_predictions_per_seq], flow.int32),
    "masked_lm_weights": ([CFG.max_predictions_per_seq], flow.float),
}
CLASSIFIER_FIELDS = {
    "input_ids": ([CFG.seq_length], flow.int32),
    "input_mask": ([CFG.seq_length], flow.int32),
    "segment_ids": ([CFG.seq_length], flow.int32),
    "label_ids": ([1], flow.int32),
    "is_real_example": ([1], flow.int32),
}
STEPS = 8
# the v0.3-era scripts call the misspelled, deprecated scheduler name (OneFlow warned too)
pytestmark = pytest.mark.filterwarnings("ignore:PolynomialSchduler will be removed")


def pretrain_job(data_dir):
    @flow.global_function(type="train", function_config=bert.function_config())
    def PretrainJob():
        total, mlm, nsp = bert.pretrain(bert.decoders(data_dir, BATCH, PRETRAIN_FIELDS), CFG)
        bert.optimizer(1e-3, iter_num=4 * STEPS).minimize(total)
        return {"total_loss": total, "mlm_loss": mlm, "nsp_loss": nsp}
    return PretrainJob


@pytest.mark.parametrize("backend", ["numpy", "strict"])
def test_bert_pretraining_trains(tmp_path, backend):
    ofrecord.write_ofrecord(tmp_path / "pretrain", pretraining_records())
    with flow.backends.use(backend):
        job = pretrain_job(str(tmp_path / "pretrain"))
        results = [job().get() for _ in range(STEPS)]
    totals = [float(np.mean(r["total_loss"].numpy())) for r in results]
    assert_falls(totals)
    assert_falls([float(np.mean(r["mlm_loss"].numpy())) for r in results])
    first = results[0]
    assert totals[0] == pytest.approx(float(np.mean(first["mlm_loss"].numpy()))
                                      + float(np.mean(first["nsp_loss"].numpy())), rel=1e-6)
    names = set(flow.get_all_variables())
    for name in ["bert-embeddings-word_embeddings",
                 "bert-embeddings-LayerNorm-gamma",
                 "bert-encoder-layer_1-attention-self-query-weight",
                 "bert-encoder-layer_0-attention-output-LayerNorm-beta",
                 "bert-encoder-layer_0-intermediate-dense-weight",
                 "bert-encoder-layer_0-output-dense-bias",
                 "bert-pooler-dense-weight",
                 "cls-predictions-transform-dense-weight",
                 "cls-predictions-output_bias",
                 "cls-seq_relationship-output_weights"]:
        assert name in names, name
    assert flow.get_all_variables()["bert-encoder-layer_1-attention-self-query-weight"] \
        .shape == (CFG.hidden_size, CFG.hidden_size)


def test_bert_classifier_trains_with_add_loss_and_minimize(tmp_path):
    ofrecord.write_ofrecord(tmp_path / "train", classifier_records())

    @flow.global_function(type="train", function_config=bert.function_config())
    def BertGlueFinetuneJob():
        loss = bert.glue_classifier(
            bert.decoders(str(tmp_path / "train"), BATCH, CLASSIFIER_FIELDS), CFG)
        flow.losses.add_loss(loss)
        bert.optimizer(2e-3, iter_num=4 * STEPS).minimize(loss)
        return {"loss": loss}

    losses = [float(np.mean(BertGlueFinetuneJob().get()["loss"].numpy()))
              for _ in range(STEPS)]
    assert_falls(losses)
    assert flow.get_all_variables()["classification-output_weights"].shape == (
        2, CFG.hidden_size)
