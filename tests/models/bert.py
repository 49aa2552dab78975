"""BERT as OneFlow-Benchmark's ``LanguageModeling/BERT`` (its v0.3-era ``bert.py``,
``pretrain.py``, ``classifier.py`` and ``util.py``) builds it: variables made with
``flow.get_variable`` under ``flow.scope.namespace`` (``bert-encoder-layer_0-attention-
self-query-weight``...), fully connected layers as ``matmul`` + ``bias_add`` with
truncated-normal weights, the additive attention mask, the masked-LM head gathering the
masked positions with ``flow.gather(..., batch_dims=2)`` and scoring them against the word
embedding table, the next-sentence head on the pooled first token, and their optimizer:
AdamW over a linear warm-up into a polynomial decay, global-norm clipping, no decay on
biases and layer norms. Written anew after reading OneFlow-Benchmark; the structure and
the names are theirs so that checkpoints and programs line up."""
from __future__ import annotations

import math
from dataclasses import dataclass

import aioflow as flow
import aioflow.core.operator.op_conf_pb2 as op_conf_util


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 100
    seq_length: int = 16
    hidden_size: int = 32
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 128
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 32
    type_vocab_size: int = 2
    max_predictions_per_seq: int = 4
    initializer_range: float = 0.02


def _initializer(std):
    return flow.truncated_normal(std)


def fully_connected(x, input_size, units, name, std):
    """``_FullyConnected``: an ``(input_size, units)`` weight (OneFlow-Benchmark's layout,
    not ``layers.dense``'s) and a zero bias."""
    weight = flow.get_variable(name + "-weight", shape=[input_size, units], dtype=x.dtype,
                               initializer=_initializer(std))
    bias = flow.get_variable(name + "-bias", shape=[units], dtype=x.dtype,
                             initializer=flow.constant_initializer(0.0))
    return flow.nn.bias_add(flow.matmul(x, weight), bias)


def dropout(x, rate):
    return x if rate == 0.0 else flow.nn.dropout(x, rate=rate)


def layer_norm(x):
    return flow.layers.layer_norm(x, name="LayerNorm", begin_norm_axis=-1,
                                  begin_params_axis=-1)


def attention(x, addr, cfg: BertConfig):
    """Multi-head self-attention over 2-d rows ``(batch * seq, hidden)``."""
    heads, width = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
    std = cfg.initializer_range

    def per_head(blob):   # (batch * seq, heads * width) -> (batch, heads, seq, width)
        blob = flow.reshape(blob, [-1, cfg.seq_length, heads, width])
        return flow.transpose(blob, perm=[0, 2, 1, 3])

    query = per_head(fully_connected(x, cfg.hidden_size, heads * width, "query", std))
    key = per_head(fully_connected(x, cfg.hidden_size, heads * width, "key", std))
    value = per_head(fully_connected(x, cfg.hidden_size, heads * width, "value", std))
    scores = flow.matmul(query, key, transpose_b=True) * (1.0 / math.sqrt(float(width)))
    probs = dropout(flow.nn.softmax(scores + addr), cfg.attention_probs_dropout_prob)
    context = flow.transpose(flow.matmul(probs, value), perm=[0, 2, 1, 3])
    return flow.reshape(context, [-1, heads * width])


def encoder_layer(x, addr, cfg: BertConfig):
    """One transformer layer (post-norm) over ``(batch * seq, hidden)`` rows; variables
    named under the caller's ``layer_<i>`` namespace."""
    std = cfg.initializer_range
    with flow.scope.namespace("attention"):
        with flow.scope.namespace("self"):
            context = attention(x, addr, cfg)
        with flow.scope.namespace("output"):
            attended = fully_connected(context, cfg.hidden_size, cfg.hidden_size, "dense",
                                       std)
            attended = layer_norm(dropout(attended, cfg.hidden_dropout_prob) + x)
    with flow.scope.namespace("intermediate"):
        # OneFlow-Benchmark passes op_conf_util.kNone as the layer's activation and applies
        # gelu after it
        assert op_conf_util.kNone == 0
        inner = flow.math.gelu(fully_connected(attended, cfg.hidden_size,
                                               cfg.intermediate_size, "dense", std))
    with flow.scope.namespace("output"):
        out = fully_connected(inner, cfg.intermediate_size, cfg.hidden_size, "dense", std)
        return layer_norm(dropout(out, cfg.hidden_dropout_prob) + attended)


def attention_addr(input_mask, cfg: BertConfig):
    """0 where a token may be attended to, -10000 where it is padding: ``(batch, 1, seq,
    seq)``, added to every head's scores."""
    mask = flow.reshape(flow.cast(input_mask, dtype=flow.float), [-1, 1, cfg.seq_length])
    mask = flow.constant(0.0, dtype=flow.float, shape=[cfg.seq_length, cfg.seq_length]) + mask
    mask = flow.reshape(mask, [-1, 1, cfg.seq_length, cfg.seq_length])
    return (mask - 1.0) * 10000.0


def backbone(input_ids, input_mask, token_type_ids, cfg: BertConfig):
    """(sequence output ``(batch, seq, hidden)``, the word embedding table)."""
    std = cfg.initializer_range
    with flow.scope.namespace("bert"):
        with flow.scope.namespace("embeddings"):
            table = flow.get_variable("word_embeddings",
                                      shape=[cfg.vocab_size, cfg.hidden_size],
                                      dtype=flow.float, initializer=_initializer(std))
            out = flow.gather(params=table, indices=input_ids, axis=0)
            types = flow.get_variable("token_type_embeddings",
                                      shape=[cfg.type_vocab_size, cfg.hidden_size],
                                      dtype=out.dtype, initializer=_initializer(std))
            out = out + flow.gather(params=types, indices=token_type_ids, axis=0)
            positions = flow.get_variable(
                "position_embeddings", shape=[1, cfg.max_position_embeddings,
                                              cfg.hidden_size],
                dtype=out.dtype, initializer=_initializer(std))
            if cfg.seq_length != cfg.max_position_embeddings:
                positions = flow.slice(positions, begin=[None, 0, 0],
                                       size=[None, cfg.seq_length, -1])
            out = dropout(layer_norm(out + positions), cfg.hidden_dropout_prob)
        with flow.scope.namespace("encoder"):
            addr = attention_addr(input_mask, cfg)
            rows = flow.reshape(out, (-1, cfg.hidden_size))
            for i in range(cfg.num_hidden_layers):
                with flow.scope.namespace("layer_%d" % i):
                    rows = encoder_layer(rows, addr, cfg)
            sequence = flow.reshape(rows, (-1, cfg.seq_length, cfg.hidden_size))
    return sequence, table


def pooled_output(sequence, cfg: BertConfig):
    with flow.scope.namespace("bert-pooler"):
        first = flow.slice(sequence, [None, 0, 0], [None, 1, -1])
        first = flow.reshape(first, [-1, cfg.hidden_size])
        return flow.math.tanh(fully_connected(first, cfg.hidden_size, cfg.hidden_size,
                                              "dense", cfg.initializer_range))


def masked_lm_loss(sequence, table, positions, label_ids, label_weights, cfg: BertConfig):
    """Per-example masked-LM loss: the weighted mean of the masked positions' losses."""
    with flow.scope.namespace("other"):
        per_example_weight = flow.math.reduce_sum(label_weights, axis=[-1])
        ones = per_example_weight * 0.0 + 1.0
        mean_weight = flow.math.reduce_sum(per_example_weight) / flow.math.reduce_sum(ones)
    with flow.scope.namespace("cls-predictions"):
        picked = flow.gather(params=sequence, indices=positions, axis=2, batch_dims=2)
        picked = flow.reshape(picked, [-1, cfg.hidden_size])
        with flow.scope.namespace("transform"):
            picked = fully_connected(picked, cfg.hidden_size, cfg.hidden_size, "dense",
                                     cfg.initializer_range)
            picked = layer_norm(flow.math.gelu(picked))
        bias = flow.get_variable("output_bias", shape=[cfg.vocab_size], dtype=picked.dtype,
                                 initializer=flow.constant_initializer(1.0))
        logits = flow.nn.bias_add(flow.matmul(picked, table, transpose_b=True), bias)
        losses = flow.nn.sparse_softmax_cross_entropy_with_logits(
            logits=logits, labels=flow.reshape(label_ids, [-1]))
        losses = flow.reshape(losses, [-1, cfg.max_predictions_per_seq]) * label_weights
        with flow.scope.namespace("loss"):
            return flow.math.reduce_sum(losses, axis=[-1]) / (mean_weight + 1e-5)


def classification_loss(pooled, labels, cfg: BertConfig, label_num, scope_name):
    """Per-example softmax cross-entropy of a ``label_num``-way head on the pooled output
    (next sentence: 2 labels under ``cls-seq_relationship``)."""
    with flow.scope.namespace(scope_name):
        weight = flow.get_variable(
            "output_weights", shape=[label_num, cfg.hidden_size], dtype=pooled.dtype,
            initializer=flow.random_normal_initializer(mean=0.0,
                                                       stddev=cfg.initializer_range))
        bias = flow.get_variable("output_bias", shape=[label_num], dtype=pooled.dtype,
                                 initializer=flow.constant_initializer(0.0))
        logits = flow.nn.bias_add(flow.matmul(pooled, weight, transpose_b=True), bias)
        return flow.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=labels)


def pretrain(decoders, cfg: BertConfig):
    """``PreTrain``: (total, masked-LM, next-sentence) losses from the decoded blobs."""
    sequence, table = backbone(decoders["input_ids"], decoders["input_mask"],
                               decoders["segment_ids"], cfg)
    lm = masked_lm_loss(sequence, table, decoders["masked_lm_positions"],
                        decoders["masked_lm_ids"], decoders["masked_lm_weights"], cfg)
    ns = classification_loss(pooled_output(sequence, cfg), decoders["next_sentence_labels"],
                             cfg, 2, "cls-seq_relationship")
    with flow.scope.namespace("cls-loss"):
        lm, ns = flow.math.reduce_mean(lm), flow.math.reduce_mean(ns)
        return lm + ns, lm, ns


def glue_classifier(decoders, cfg: BertConfig, label_num=2):
    """``GlueBERT``: per-example loss and logits of the fine-tuning classifier."""
    sequence, _ = backbone(decoders["input_ids"], decoders["input_mask"],
                           decoders["segment_ids"], cfg)
    return classification_loss(pooled_output(sequence, cfg), decoders["label_ids"], cfg,
                               label_num, "classification")


def decoders(ofrecord_dir, batch_size, fields):
    """``BertDecoder``: an OFRecord reader on the CPU and one raw decoder per field
    (``{name: (shape, dtype)}``)."""
    with flow.scope.placement("cpu", "0:0"):
        records = flow.data.ofrecord_reader(ofrecord_dir, batch_size=batch_size,
                                            data_part_num=1, random_shuffle=True,
                                            shuffle_after_epoch=True)
        return {name: flow.data.OFRecordRawDecoder(records, name, shape=shape, dtype=dtype)
                for name, (shape, dtype) in fields.items()}


def optimizer(learning_rate, iter_num, warmup_proportion=0.1, weight_decay_rate=0.01):
    """``util.CreateOptimizer``: AdamW over a linear warm-up into a polynomial decay to 0,
    clipped by the global norm, no weight decay on biases and layer norms."""
    warmup = flow.optimizer.warmup.linear(int(iter_num * warmup_proportion), 0)
    schedule = flow.optimizer.PolynomialSchduler(learning_rate, iter_num, 0.0,
                                                 warmup=warmup)
    return flow.optimizer.AdamW(schedule, epsilon=1e-6, weight_decay=weight_decay_rate,
                                weight_decay_excludes=["bias", "LayerNorm", "layer_norm"],
                                grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0))


def function_config():
    """``util.GetFunctionConfig``."""
    config = flow.function_config()
    config.enable_auto_mixed_precision(False)
    config.enable_fuse_add_to_output(True)
    config.enable_fuse_model_update_ops(True)
    return config
