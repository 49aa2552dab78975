"""Train-step time of the v0.3 model zoo (tests/models/) at full size beside PyTorch CPU
eager of the same architecture written here: ResNet-50 (batch 8, 224x224, SGD with
momentum) and BERT-base (12 layers, hidden 768, seq 128, batch 8, the GLUE classifier,
AdamW). Rounds interleave the two frameworks with a pause after each; prints every
round's seconds per step and the range.

    pip install torch==2.13.0        # optional; not a dependency of aioflow
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/zoo_models.py \\
        [--rounds 3] [--steps 2] [--models resnet50,bert_base]
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore", message=".*has no effect in aioflow")
warnings.filterwarnings("ignore", message="PolynomialSchduler will be removed")

import aioflow as flow  # noqa: E402
import aioflow.typing as tp  # noqa: E402

BATCH = 8


# -- ResNet-50 -----------------------------------------------------------------------------
def resnet50_job(batch=BATCH, image=224, classes=1000, width_divisor=1, schedule=True):
    """The zoo's ResNet-50 train job (tests/models/test_resnet.py's model, ``width_divisor``
    dividing its channel widths) and a fixed random batch for it: ``(job, (images,
    labels))``. SGD with momentum 0.9, under the zoo's warm-up + cosine schedule, or with
    ``schedule=False`` at a constant rate (a CUDA graph bakes the learning rate in: a rate
    that changes every step would capture the step again every step)."""
    from tests.models import test_resnet as R
    from tests.models.zoo import sgd_with_warmup, train_config
    R.WIDTH_DIVISOR, R.CLASSES = width_divisor, classes

    @flow.global_function(type="train", function_config=train_config())
    def step(images: tp.Numpy.Placeholder((batch, 3, image, image)),
             labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, R.resnet50(images))
        optimizer = (sgd_with_warmup(lr=0.01) if schedule
                     else flow.optimizer.SGD(0.01, momentum=0.9))
        optimizer.minimize(loss)
        return loss
    return step, resnet50_batch(batch, image, classes)


def resnet50_batch(batch=BATCH, image=224, classes=1000):
    """A fixed random batch: ``(images, labels)``."""
    rng = np.random.default_rng(0)
    return (rng.standard_normal((batch, 3, image, image)).astype(np.float32),
            rng.integers(0, classes, batch).astype(np.int32))


def resnet50_flow():
    step, inputs = resnet50_job()
    return lambda: step(*inputs)


def resnet50_torch_net(classes=1000, width_divisor=1):
    """torchvision's ResNet-50 layout (the zoo model's), written out: ``nn.Module``."""
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, inner, cout, stride):
            super().__init__()
            self.a = nn.Sequential(nn.Conv2d(cin, inner, 1, bias=False), nn.BatchNorm2d(inner),
                                   nn.ReLU(),
                                   nn.Conv2d(inner, inner, 3, stride, 1, bias=False),
                                   nn.BatchNorm2d(inner), nn.ReLU(),
                                   nn.Conv2d(inner, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                        nn.BatchNorm2d(cout))
                          if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            return (self.a(x) + self.short(x)).relu()

    stem = 64 // width_divisor
    layers, cin = [nn.Conv2d(3, stem, 7, 2, 3, bias=False), nn.BatchNorm2d(stem), nn.ReLU(),
                   nn.MaxPool2d(3, 2, 1)], stem
    for i, (count, inner) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
        inner //= width_divisor
        for j in range(count):
            layers.append(Bottleneck(cin, inner, inner * 4, 2 if i and not j else 1))
            cin = inner * 4
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


def resnet50_torch():
    import torch
    net = resnet50_torch_net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = (torch.from_numpy(a) for a in resnet50_batch())
    y = y.long()

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return float(loss.detach())
    return step


# -- BERT-base classifier ------------------------------------------------------------------
def bert_cfg(dropout=0.1, **sizes):
    """BERT-base's configuration (12 layers, hidden 768, seq 128), or other ``sizes``."""
    from tests.models import bert
    base = dict(vocab_size=30522, seq_length=128, hidden_size=768, num_hidden_layers=12,
                num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512,
                type_vocab_size=2)
    return bert.BertConfig(**{**base, **sizes}, hidden_dropout_prob=dropout,
                           attention_probs_dropout_prob=dropout)


def bert_batch(cfg, batch=BATCH):
    """A fixed random batch: ``(ids, mask, segments, labels)``."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, cfg.vocab_size, (batch, cfg.seq_length)).astype(np.int32)
    mask = np.ones((batch, cfg.seq_length), np.int32)
    segments = (np.arange(cfg.seq_length) >= cfg.seq_length // 2).astype(np.int32)
    return ids, mask, np.broadcast_to(segments, ids.shape).copy(), \
        rng.integers(0, 2, batch).astype(np.int32)


def bert_job(cfg, batch=BATCH, schedule=True):
    """The zoo's BERT GLUE classifier train job (tests/models/bert.py) and a fixed batch:
    ``(job, inputs)``. AdamW with global-norm clipping, under OneFlow-Benchmark's warm-up
    + polynomial decay, or with ``schedule=False`` at a constant rate (for CUDA graphs)."""
    from tests.models import bert
    s = cfg.seq_length

    @flow.global_function(type="train", function_config=bert.function_config())
    def step(ids: tp.Numpy.Placeholder((batch, s), dtype=flow.int32),
             mask: tp.Numpy.Placeholder((batch, s), dtype=flow.int32),
             segments: tp.Numpy.Placeholder((batch, s), dtype=flow.int32),
             labels: tp.Numpy.Placeholder((batch,), dtype=flow.int32)) -> tp.Numpy:
        loss = bert.glue_classifier({"input_ids": ids, "input_mask": mask,
                                     "segment_ids": segments, "label_ids": labels}, cfg)
        flow.losses.add_loss(loss)
        if schedule:
            bert.optimizer(2e-5, iter_num=1000).minimize(loss)
        else:
            flow.optimizer.AdamW(2e-5, epsilon=1e-6, weight_decay=0.01,
                                 weight_decay_excludes=["bias", "LayerNorm", "layer_norm"],
                                 grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0)
                                 ).minimize(loss)
        return loss
    return step, bert_batch(cfg, batch)


def bert_base_flow():
    step, inputs = bert_job(bert_cfg())
    return lambda: step(*inputs)


def bert_torch_net(cfg):
    """The same BERT classifier in PyTorch: ``forward(ids, mask, segments)`` -> logits."""
    import torch
    from torch import nn
    F = nn.functional
    h, heads = cfg.hidden_size, cfg.num_attention_heads

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.ModuleList(nn.Linear(h, h) for _ in range(3))
            self.out, self.ln1 = nn.Linear(h, h), nn.LayerNorm(h)
            self.inter, self.out2 = nn.Linear(h, cfg.intermediate_size), \
                nn.Linear(cfg.intermediate_size, h)
            self.ln2, self.drop = nn.LayerNorm(h), nn.Dropout(cfg.hidden_dropout_prob)
            self.drop_probs = nn.Dropout(cfg.attention_probs_dropout_prob)

        def forward(self, x, addr):
            b, s, _ = x.shape
            q, k, v = (m(x).view(b, s, heads, -1).transpose(1, 2) for m in self.qkv)
            probs = self.drop_probs(torch.softmax(q @ k.transpose(-1, -2)
                                                  / np.sqrt(h // heads) + addr, -1))
            ctx = (probs @ v).transpose(1, 2).reshape(b, s, h)
            x = self.ln1(self.drop(self.out(ctx)) + x)
            return self.ln2(self.drop(self.out2(F.gelu(self.inter(x)))) + x)

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.words = nn.Embedding(cfg.vocab_size, h)
            self.types = nn.Embedding(cfg.type_vocab_size, h)
            self.positions = nn.Parameter(torch.zeros(cfg.max_position_embeddings, h))
            self.ln, self.drop = nn.LayerNorm(h), nn.Dropout(cfg.hidden_dropout_prob)
            self.layers = nn.ModuleList(Layer() for _ in range(cfg.num_hidden_layers))
            self.pool, self.cls = nn.Linear(h, h), nn.Linear(h, 2)

        def forward(self, ids, mask, segments):
            x = self.words(ids) + self.types(segments) + self.positions[:ids.shape[1]]
            x = self.drop(self.ln(x))
            addr = (mask[:, None, None, :].float() - 1.0) * 10000.0
            for layer in self.layers:
                x = layer(x, addr)
            return self.cls(torch.tanh(self.pool(x[:, 0])))

    return Bert()


def bert_adamw(params):
    """The zoo job's optimizer in PyTorch (its clipping is in the step)."""
    import torch
    return torch.optim.AdamW(params, lr=2e-5, eps=1e-6, weight_decay=0.01)


def bert_base_torch():
    import torch
    cfg = bert_cfg()
    net = bert_torch_net(cfg)
    opt = bert_adamw(net.parameters())
    ids, mask, segments, labels = (torch.from_numpy(a).long() for a in bert_batch(cfg))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(ids, mask, segments), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return float(loss.detach())
    return step


MODELS = {"resnet50": (resnet50_flow, resnet50_torch),
          "bert_base": (bert_base_flow, bert_base_torch)}


def _seconds(step, steps):
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--pause", type=float, default=1.0)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    import torch
    torch.set_num_threads(2)
    for model in args.models.split(","):
        make_flow, make_torch = MODELS[model]
        flow.clear_default_session()
        flow.random.seed(0)
        torch.manual_seed(0)
        ours, theirs = make_flow(), make_torch()
        ours(), theirs()                        # compile, allocate, warm up
        rows = []
        for r in range(args.rounds):
            pair = (_seconds(ours, args.steps), _seconds(theirs, args.steps))
            rows.append(pair)
            print(f"{model} round {r}: aioflow {pair[0]:.3f} s/step, PyTorch {pair[1]:.3f} "
                  f"s/step, ratio {pair[0] / pair[1]:.2f}", flush=True)
            time.sleep(args.pause)
        a, t = np.array(rows).T
        ratios = a / t
        print(f"{model}: aioflow {a.min():.3f}-{a.max():.3f} s/step, PyTorch "
              f"{t.min():.3f}-{t.max():.3f} s/step, ratio {ratios.min():.2f}-"
              f"{ratios.max():.2f} (median {np.median(ratios):.2f})", flush=True)


if __name__ == "__main__":
    main()
