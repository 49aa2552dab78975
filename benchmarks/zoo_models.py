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
def resnet50_flow():
    from tests.models import test_resnet as R
    from tests.models.zoo import sgd_with_warmup, train_config
    R.WIDTH_DIVISOR, R.CLASSES = 1, 1000

    @flow.global_function(type="train", function_config=train_config())
    def step(images: tp.Numpy.Placeholder((BATCH, 3, 224, 224)),
             labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, R.resnet50(images))
        sgd_with_warmup(lr=0.01).minimize(loss)
        return loss
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 3, 224, 224)).astype(np.float32)
    y = rng.integers(0, 1000, BATCH).astype(np.int32)
    return lambda: step(x, y)


def resnet50_torch():
    import torch
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
            return torch.relu(self.a(x) + self.short(x))

    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                   nn.MaxPool2d(3, 2, 1)], 64
    for i, (count, inner) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
        for j in range(count):
            layers.append(Bottleneck(cin, inner, inner * 4, 2 if i and not j else 1))
            cin = inner * 4
    net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((BATCH, 3, 224, 224)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 1000, BATCH))

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return float(loss.detach())
    return step


# -- BERT-base classifier ------------------------------------------------------------------
def _bert_cfg():
    from tests.models import bert
    return bert.BertConfig(vocab_size=30522, seq_length=128, hidden_size=768,
                           num_hidden_layers=12, num_attention_heads=12,
                           intermediate_size=3072, max_position_embeddings=512,
                           type_vocab_size=2)


def _bert_batch(cfg):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, cfg.vocab_size, (BATCH, cfg.seq_length)).astype(np.int32)
    mask = np.ones((BATCH, cfg.seq_length), np.int32)
    segments = (np.arange(cfg.seq_length) >= cfg.seq_length // 2).astype(np.int32)
    return ids, mask, np.broadcast_to(segments, ids.shape).copy(), \
        rng.integers(0, 2, BATCH).astype(np.int32)


def bert_base_flow():
    from tests.models import bert
    cfg = _bert_cfg()
    s = cfg.seq_length

    @flow.global_function(type="train", function_config=bert.function_config())
    def step(ids: tp.Numpy.Placeholder((BATCH, s), dtype=flow.int32),
             mask: tp.Numpy.Placeholder((BATCH, s), dtype=flow.int32),
             segments: tp.Numpy.Placeholder((BATCH, s), dtype=flow.int32),
             labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        loss = bert.glue_classifier({"input_ids": ids, "input_mask": mask,
                                     "segment_ids": segments, "label_ids": labels}, cfg)
        flow.losses.add_loss(loss)
        bert.optimizer(2e-5, iter_num=1000).minimize(loss)
        return loss
    batch = _bert_batch(cfg)
    return lambda: step(*batch)


def bert_base_torch():
    import torch
    from torch import nn
    F = nn.functional
    cfg = _bert_cfg()
    h, heads = cfg.hidden_size, cfg.num_attention_heads

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.ModuleList(nn.Linear(h, h) for _ in range(3))
            self.out, self.ln1 = nn.Linear(h, h), nn.LayerNorm(h)
            self.inter, self.out2 = nn.Linear(h, cfg.intermediate_size), \
                nn.Linear(cfg.intermediate_size, h)
            self.ln2, self.drop = nn.LayerNorm(h), nn.Dropout(0.1)

        def forward(self, x, addr):
            b, s, _ = x.shape
            q, k, v = (m(x).view(b, s, heads, -1).transpose(1, 2) for m in self.qkv)
            probs = self.drop(torch.softmax(q @ k.transpose(-1, -2) / np.sqrt(h // heads)
                                            + addr, -1))
            ctx = (probs @ v).transpose(1, 2).reshape(b, s, h)
            x = self.ln1(self.drop(self.out(ctx)) + x)
            return self.ln2(self.drop(self.out2(F.gelu(self.inter(x)))) + x)

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.words = nn.Embedding(cfg.vocab_size, h)
            self.types = nn.Embedding(cfg.type_vocab_size, h)
            self.positions = nn.Parameter(torch.zeros(cfg.max_position_embeddings, h))
            self.ln, self.drop = nn.LayerNorm(h), nn.Dropout(0.1)
            self.layers = nn.ModuleList(Layer() for _ in range(cfg.num_hidden_layers))
            self.pool, self.cls = nn.Linear(h, h), nn.Linear(h, 2)

        def forward(self, ids, mask, segments):
            x = self.words(ids) + self.types(segments) + self.positions[:ids.shape[1]]
            x = self.drop(self.ln(x))
            addr = (mask[:, None, None, :].float() - 1.0) * 10000.0
            for layer in self.layers:
                x = layer(x, addr)
            return self.cls(torch.tanh(self.pool(x[:, 0])))

    net = Bert()
    opt = torch.optim.AdamW(net.parameters(), lr=2e-5, eps=1e-6, weight_decay=0.01)
    ids, mask, segments, labels = (torch.from_numpy(a).long() for a in _bert_batch(cfg))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(net(ids, mask, segments), labels)
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
