"""Train-step time of the v0.3 model zoo (tests/models/, the zoo's own model code) at full
size beside PyTorch CPU eager of the same architecture written here (plain ``torch.nn``,
no torchvision):

* the image classifiers, batch 8, 1000 classes, SGD with momentum (the zoo's warm-up +
  cosine schedule; PyTorch at a constant rate): ResNet-50 and ResNeXt-50 (32x4d) at
  224x224 (test_resnet.py), AlexNet, VGG16 with batch norm and MobileNet-v2 at 224x224,
  Inception-v3 at 299x299 (test_cnns.py, OneFlow's ``Classification/cnns``);
* BERT-base (12 layers, hidden 768, seq 128, batch 8, the GLUE classifier, AdamW);
* DCGAN (test_dcgan.py, OneFlow's ``Generative/dcgan.py`` at its own widths, 28x28
  images, noise of 100, batch 8): a step is one discriminator step then one generator
  step, Adam;
* Wide&Deep (test_wide_and_deep.py, OneFlow's ``wdl_train_eval.py``): batch 512, 13 dense
  fields, 2 wide and 26 deep sparse fields, vocabularies of 200,000, embeddings of 16,
  seven hidden layers of 1024, LazyAdam (PyTorch: SparseAdam on the embeddings, Adam on
  the rest).

Rounds interleave the two frameworks with a pause after each; prints every round's
seconds per step and the range. ``--check`` builds each model at a tiny size (the zoo
tests' own sizes) and prints the two frameworks' parameter counts (they must match) and
the losses of a few steps on one batch (they must fall); it exits 1 where one does not.

    pip install torch==2.13.0        # optional; not a dependency of aioflow
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/zoo_models.py \\
        [--rounds 3] [--steps 2] [--models resnet50,bert_base,...] [--check]
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
warnings.filterwarnings("ignore", message="conv2d_transpose. output_shape")

import aioflow as flow  # noqa: E402
import aioflow.typing as tp  # noqa: E402

BATCH = 8

# The image classifiers' input sizes at full size, and the zoo tests' (--check) own.
IMAGE = {"resnet50": 224, "resnext50": 224, "alexnet": 224, "vgg16_bn": 224,
         "mobilenet_v2": 224, "inception_v3": 299}
TINY_IMAGE = {"resnet50": 32, "resnext50": 32, "alexnet": 67, "vgg16_bn": 32,
              "mobilenet_v2": 64, "inception_v3": 75}
_TEST_SIZES = {}


def sized(module, tiny, full):
    """``module`` (a zoo test module) with its size constants set to ``full`` (name ->
    value), or back to the test's own values with ``tiny``; the model code reads them when
    its job is built."""
    own = _TEST_SIZES.setdefault(module.__name__, {k: getattr(module, k) for k in full})
    for name, value in (own if tiny else full).items():
        setattr(module, name, value)
    return module


def flow_parameter_count():
    """The default session's model parameters: its variables but the optimizers' state and
    batch norm's moving statistics (PyTorch's buffers)."""
    from aioflow.engine.session import default_session
    return sum(int(np.prod(r.shape)) for r in default_session().variables.values()
               if not r.is_state and "-moving_" not in r.name)


def counted(step, *nets):
    """``step`` with ``parameters``: the PyTorch parameter count of ``nets``."""
    step.parameters = sum(p.numel() for net in nets for p in net.parameters())
    return step


def image_batch(batch=BATCH, image=224, classes=1000):
    """A fixed random batch: ``(images, labels)``."""
    rng = np.random.default_rng(0)
    return (rng.standard_normal((batch, 3, image, image)).astype(np.float32),
            rng.integers(0, classes, batch).astype(np.int32))


# -- The image classifiers: ResNet-50, ResNeXt-50, AlexNet, VGG16-bn, MobileNet-v2, Inception-v3
def resnet50_job(batch=BATCH, image=224, classes=1000, width_divisor=1, schedule=True,
                 groups=1):
    """The zoo's ResNet-50 train job (tests/models/test_resnet.py's model, ``width_divisor``
    dividing its channel widths; ResNeXt-50 with ``groups``) and a fixed random batch for
    it: ``(job, (images, labels))``. SGD with momentum 0.9, under the zoo's warm-up +
    cosine schedule, or with ``schedule=False`` at a constant rate (a CUDA graph bakes the
    learning rate in: a rate that changes every step would capture the step again every
    step)."""
    from tests.models import test_resnet as R
    from tests.models.zoo import classifier_job
    R.WIDTH_DIVISOR, R.CLASSES = width_divisor, classes
    return (classifier_job(lambda images: R.resnet50(images, groups), batch, image, lr=0.01,
                           schedule=schedule),
            image_batch(batch, image, classes))


def classifier_flow_job(name, batch=BATCH, tiny=False, schedule=True):
    """The zoo's train job of image classifier ``name`` (a key of ``IMAGE``) and a fixed
    batch: ``(job, inputs)``. Full size: the published widths (ResNeXt-50 with 32 groups,
    the heads of AlexNet and VGG 4096 wide), 1000 classes; ``tiny``: the zoo tests' sizes
    (widths / 8, 10 classes, ResNeXt with 8 groups) and images."""
    image = (TINY_IMAGE if tiny else IMAGE)[name]
    if name in ("resnet50", "resnext50"):
        groups = 1 if name == "resnet50" else 8 if tiny else 32
        return resnet50_job(batch, image, *((10, 8) if tiny else (1000, 1)), schedule, groups)
    from tests.models import test_cnns
    from tests.models.zoo import classifier_job
    C = sized(test_cnns, tiny, dict(CLASSES=1000, DIV=1, HIDDEN=4096))
    return (classifier_job(getattr(C, name), batch, image, lr=0.01, schedule=schedule),
            image_batch(batch, image, C.CLASSES))


def resnet50_torch_net(classes=1000, width_divisor=1, groups=1):
    """torchvision's ResNet-50 layout (the zoo model's), written out: ``nn.Module``; with
    ``groups`` ResNeXt-50's (inner widths doubled, grouped 3x3 convolutions, blocks twice
    as wide as their inner width rather than four times)."""
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, inner, cout, stride):
            super().__init__()
            self.a = nn.Sequential(nn.Conv2d(cin, inner, 1, bias=False), nn.BatchNorm2d(inner),
                                   nn.ReLU(),
                                   nn.Conv2d(inner, inner, 3, stride, 1, groups=groups,
                                             bias=False),
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
    widths, expansion = ([64, 128, 256, 512], 4) if groups == 1 else ([128, 256, 512, 1024], 2)
    for i, (count, inner) in enumerate(zip([3, 4, 6, 3], widths)):
        inner //= width_divisor
        for j in range(count):
            layers.append(Bottleneck(cin, inner, inner * expansion, 2 if i and not j else 1))
            cin = inner * expansion
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


def conv_layer(cin, cout, kernel, stride=1, padding="SAME", bias=True, bn=False,
               activation="relu", groups=1):
    """test_cnns.py's ``conv2d_layer`` in PyTorch: a convolution (+ bias) (+ batch norm of
    momentum 0.997, epsilon 1.001e-5) (+ relu or relu6)."""
    from torch import nn
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    layers = [nn.Conv2d(cin, cout, (kh, kw), stride, (kh // 2, kw // 2) if padding == "SAME"
                        else 0, groups=groups, bias=bias)]
    if bn:
        layers.append(nn.BatchNorm2d(cout, eps=1.001e-5, momentum=0.003))
    if activation:
        layers.append(nn.ReLU6() if activation == "relu6" else nn.ReLU())
    return nn.Sequential(*layers)


def classifier_head(features, hidden, classes, dropout=True):
    """test_cnns.py's ``classifier``: flatten, dense + relu (+ dropout 0.5) per hidden
    width, a dense layer to ``classes``."""
    from torch import nn
    layers = [nn.Flatten()]
    for units in hidden:
        layers += [nn.Linear(features, units), nn.ReLU()] + ([nn.Dropout(0.5)] if dropout else [])
        features = units
    return layers + [nn.Linear(features, classes)]


def alexnet_torch_net(classes=1000, div=1, hidden=4096, image=224):
    """test_cnns.py's AlexNet (OneFlow's: average pooling, a 5x5 input to the head)."""
    from torch import nn
    side = (image - 11) // 4 + 1
    for _ in range(3):
        side = (side - 3) // 2 + 1
    return nn.Sequential(conv_layer(3, 64 // div, 11, 4, "VALID"), nn.AvgPool2d(3, 2),
                         conv_layer(64 // div, 192 // div, 5), nn.AvgPool2d(3, 2),
                         conv_layer(192 // div, 384 // div, 3),
                         conv_layer(384 // div, 384 // div, 3),
                         conv_layer(384 // div, 256 // div, 3), nn.AvgPool2d(3, 2),
                         *classifier_head(256 // div * side * side, [hidden, hidden], classes))


def vgg16_bn_torch_net(classes=1000, div=1, hidden=4096, image=224):
    from torch import nn
    layers, cin = [], 3
    for count, filters in [(2, 64), (2, 128), (3, 256), (3, 512), (3, 512)]:
        for _ in range(count):
            layers.append(conv_layer(cin, filters // div, 3, bn=True))
            cin = filters // div
        layers.append(nn.MaxPool2d(2, 2))
    side = image // 32
    return nn.Sequential(*layers, *classifier_head(cin * side * side, [hidden, hidden], classes))


def mobilenet_v2_torch_net(classes=1000, div=1):
    from torch import nn

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expansion, shortcut):
            super().__init__()
            hidden = cin * expansion
            layers = [conv_layer(cin, hidden, 1, bias=False, bn=True, activation="relu6")
                      ] if expansion != 1 else []
            self.body = nn.Sequential(
                *layers, conv_layer(hidden, hidden, 3, stride, bias=False, bn=True,
                                    activation="relu6", groups=hidden),
                conv_layer(hidden, cout, 1, bias=False, bn=True, activation=None))
            self.shortcut = shortcut

        def forward(self, x):
            return x + self.body(x) if self.shortcut else self.body(x)

    cin = 32 // div
    layers = [conv_layer(3, cin, 3, 2, bias=False, bn=True, activation="relu6")]
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for j in range(n):
            cout = max(c // div, 2)
            layers.append(InvertedResidual(cin, cout, s if j == 0 else 1, t,
                                           j > 0 and cin == cout))
            cin = cout
    layers.append(conv_layer(cin, 1280 // div, 1, bias=False, bn=True, activation="relu6"))
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1),
                         *classifier_head(1280 // div, [], classes, dropout=False))


def inception_v3_torch_net(classes=1000, div=1):
    """test_cnns.py's Inception-v3 (its InceptionE blocks have no double-3x3 branch)."""
    import torch
    from torch import nn

    class Concat(nn.Module):
        def __init__(self, *branches):
            super().__init__()
            self.branches = nn.ModuleList(branches)

        def forward(self, x):
            return torch.cat([branch(x) for branch in self.branches], 1)

    def branch(cin, layers):
        """``(module, channels out)`` of test_cnns' ``_branch``: conv + batch norm + relu
        per (filters, kernel, strides, padding)."""
        convs = []
        for filters, kernel, strides, padding in layers:
            convs.append(conv_layer(cin, max(filters // div, 2), kernel, strides, padding,
                                    bias=False, bn=True))
            cin = max(filters // div, 2)
        return nn.Sequential(*convs), cin

    def pool_branch(cin, kind, proj=None):
        if kind == "max":
            return nn.MaxPool2d(3, 2), cin
        conv, cout = branch(cin, [(proj, 1, 1, "SAME")])
        return nn.Sequential(nn.AvgPool2d(3, 1, 1, count_include_pad=False), conv), cout

    def e_split(cin):
        conv, mid = branch(cin, [(384, 1, 1, "SAME")])
        sides = [conv_layer(mid, 384 // div, k, 1, "SAME", bias=False, bn=True)
                 for k in ((1, 3), (3, 1))]
        return nn.Sequential(conv, Concat(*sides)), 2 * (384 // div)

    def mixed(cin, *branches):
        built = [make(cin) for make in branches]
        return Concat(*(m for m, _ in built)), sum(c for _, c in built)

    stem0, c = branch(3, [(32, 3, 2, "VALID"), (32, 3, 1, "VALID"), (64, 3, 1, "SAME")])
    stem1, c = branch(c, [(80, 1, 1, "VALID"), (192, 3, 1, "VALID")])
    layers = [stem0, nn.MaxPool2d(3, 2), stem1, nn.MaxPool2d(3, 2)]
    blocks = []
    for proj in [32, 64, 64]:                                          # InceptionA x3
        blocks.append([lambda y: branch(y, [(64, 1, 1, "SAME")]),
                       lambda y: branch(y, [(48, 1, 1, "SAME"), (64, 5, 1, "SAME")]),
                       lambda y: branch(y, [(64, 1, 1, "SAME"), (96, 3, 1, "SAME"),
                                            (96, 3, 1, "SAME")]),
                       lambda y, p=proj: pool_branch(y, "avg", p)])
    blocks.append([lambda y: branch(y, [(384, 3, 2, "VALID")]),       # InceptionB
                   lambda y: branch(y, [(64, 1, 1, "SAME"), (96, 3, 1, "SAME"),
                                        (96, 3, 2, "VALID")]),
                   lambda y: pool_branch(y, "max")])
    for m in [128, 160, 160, 192]:                                     # InceptionC x4
        blocks.append([lambda y: branch(y, [(192, 1, 1, "SAME")]),
                       lambda y, m=m: branch(y, [(m, 1, 1, "SAME"), (m, (1, 7), 1, "SAME"),
                                                 (192, (7, 1), 1, "SAME")]),
                       lambda y, m=m: branch(y, [(m, 1, 1, "SAME"), (m, (7, 1), 1, "SAME"),
                                                 (m, (1, 7), 1, "SAME"), (m, (7, 1), 1, "SAME"),
                                                 (192, (1, 7), 1, "SAME")]),
                       lambda y: pool_branch(y, "avg", 192)])
    blocks.append([lambda y: branch(y, [(192, 1, 1, "SAME"), (320, 3, 2, "VALID")]),  # D
                   lambda y: branch(y, [(192, 1, 1, "SAME"), (192, (1, 7), 1, "SAME"),
                                        (192, (7, 1), 1, "SAME"), (192, 3, 2, "VALID")]),
                   lambda y: pool_branch(y, "max")])
    for _ in range(2):                                                 # InceptionE x2
        blocks.append([lambda y: branch(y, [(320, 1, 1, "SAME")]), e_split,
                       lambda y: pool_branch(y, "avg", 192)])
    for block in blocks:
        module, c = mixed(c, *block)
        layers.append(module)
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1),
                         *classifier_head(c, [], classes, dropout=False))


def classifier_torch_net(name, tiny=False):
    """Image classifier ``name`` in PyTorch at full size or at the tests' (``tiny``)."""
    classes, div = (10, 8) if tiny else (1000, 1)
    image, hidden = (TINY_IMAGE if tiny else IMAGE)[name], 4096 // (64 if tiny else 1)
    if name in ("resnet50", "resnext50"):
        return resnet50_torch_net(classes, div, 1 if name == "resnet50" else 8 if tiny else 32)
    return {"alexnet": lambda: alexnet_torch_net(classes, div, hidden, image),
            "vgg16_bn": lambda: vgg16_bn_torch_net(classes, div, hidden, image),
            "mobilenet_v2": lambda: mobilenet_v2_torch_net(classes, div),
            "inception_v3": lambda: inception_v3_torch_net(classes, div)}[name]()


def classifier_optimizer(name, params):
    """SGD with momentum 0.9 at 0.01 over ``params`` (a list), test_cnns.py's L2
    regularization of its convolution weights as their weight decay (5e-5); none for the
    ResNets (as this benchmark's first ResNet-50 row ran)."""
    import torch
    decayed = [p.ndim == 4 and not name.startswith("res") for p in params]
    return torch.optim.SGD([dict(params=[p for p, d in zip(params, decayed) if d],
                                 weight_decay=5e-5),
                            dict(params=[p for p, d in zip(params, decayed) if not d])],
                           lr=0.01, momentum=0.9)


def classifier_pair(name):
    """``(aioflow step maker, PyTorch step maker)`` of image classifier ``name``, each
    taking ``tiny``."""
    def make_flow(tiny=False):
        job, inputs = classifier_flow_job(name, tiny=tiny)
        return lambda: job(*inputs)

    def make_torch(tiny=False):
        import torch
        net = classifier_torch_net(name, tiny)
        optimizer = classifier_optimizer(name, list(net.parameters()))
        images, labels = image_batch(BATCH, (TINY_IMAGE if tiny else IMAGE)[name],
                                     10 if tiny else 1000)
        x, y = torch.from_numpy(images), torch.from_numpy(labels).long()

        def step():
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            optimizer.step()
            return float(loss.detach())
        return counted(step, net)
    return make_flow, make_torch


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


def bert_job(cfg, batch=BATCH, schedule=True, lr=2e-5):
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
            bert.optimizer(lr, iter_num=1000).minimize(loss)
        else:
            flow.optimizer.AdamW(lr, epsilon=1e-6, weight_decay=0.01,
                                 weight_decay_excludes=["bias", "LayerNorm", "layer_norm"],
                                 grad_clipping=flow.optimizer.grad_clipping.by_global_norm(1.0)
                                 ).minimize(loss)
        return loss
    return step, bert_batch(cfg, batch)


def tiny_bert():
    """BERT's sizes for dry runs and --check: 2 layers, hidden 64, seq 16, vocabulary 100."""
    return dict(vocab_size=100, seq_length=16, hidden_size=64, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=256, max_position_embeddings=32)


def bert_base_flow(tiny=False):
    """At the tiny size at the zoo test's learning rate (2e-3): 2e-5 barely moves it in a
    few steps."""
    step, inputs = bert_job(bert_cfg(**(tiny_bert() if tiny else {})),
                            lr=2e-3 if tiny else 2e-5)
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


def bert_adamw(params, lr=2e-5):
    """The zoo job's optimizer in PyTorch (its clipping is in the step)."""
    import torch
    return torch.optim.AdamW(params, lr=lr, eps=1e-6, weight_decay=0.01)


def bert_base_torch(tiny=False):
    import torch
    cfg = bert_cfg(**(tiny_bert() if tiny else {}))
    net = bert_torch_net(cfg)
    opt = bert_adamw(net.parameters(), 2e-3 if tiny else 2e-5)
    ids, mask, segments, labels = (torch.from_numpy(a).long() for a in bert_batch(cfg))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(ids, mask, segments), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return float(loss.detach())
    return counted(step, net)


# -- DCGAN ---------------------------------------------------------------------------------
def dcgan_module(tiny=False):
    """tests/models/test_dcgan.py at OneFlow's ``dcgan.py`` sizes (widths as published,
    noise of 100, batch 8), or at the test's own (``tiny``)."""
    from tests.models import test_dcgan
    return sized(test_dcgan, tiny, dict(BATCH=BATCH, Z_DIM=100, DIV=1))


def dcgan_flow(tiny=False):
    """One step: the zoo's discriminator job, then its generator job (the test's order);
    returns the discriminator's mean loss."""
    D = dcgan_module(tiny)
    train_generator, train_discriminator = D.train_jobs()
    z, images = D.inputs()

    def step():
        d_loss = train_discriminator(z, images).get()[0]
        train_generator(z).get()
        return float(np.mean(d_loss))
    return step


def dcgan_torch_nets(z_dim=100, div=1):
    """``(generator, discriminator)``: test_dcgan.py's in PyTorch (batch norm of momentum
    0.99 and epsilon 1e-3, OneFlow's defaults; leaky relu 0.3; 5x5 kernels)."""
    from torch import nn

    def bn(channels, layer=nn.BatchNorm2d):
        return layer(channels, eps=1e-3, momentum=0.01)

    g, d = 256 // div, 64 // div
    generator = nn.Sequential(
        nn.Linear(z_dim, 7 * 7 * 256 // div), bn(7 * 7 * 256 // div, nn.BatchNorm1d),
        nn.LeakyReLU(0.3), nn.Unflatten(1, (g, 7, 7)),
        nn.ConvTranspose2d(g, 128 // div, 5, 1, 2, bias=False), bn(128 // div), nn.LeakyReLU(0.3),
        nn.ConvTranspose2d(128 // div, d, 5, 2, 2, 1, bias=False), bn(d), nn.LeakyReLU(0.3),
        nn.ConvTranspose2d(d, 1, 5, 2, 2, 1, bias=False), nn.Tanh())
    discriminator = nn.Sequential(
        nn.Conv2d(1, d, 5, 2, 2), nn.LeakyReLU(0.3), nn.Dropout(0.3),
        nn.Conv2d(d, 128 // div, 5, 2, 2), nn.LeakyReLU(0.3), nn.Dropout(0.3),
        nn.Flatten(), nn.Linear(128 // div * 7 * 7, 1))
    return generator, discriminator


def dcgan_torch(tiny=False):
    """The zoo's two jobs in PyTorch: one Adam (1e-3) over both networks, each job's
    ``trainable=False`` variables frozen while it runs. As in the zoo's discriminator job,
    the generator's batch norm scales and shifts (declared without ``trainable=False``)
    train there too, through the generator's layers."""
    import torch
    F = torch.nn.functional
    D = dcgan_module(tiny)
    generator, discriminator = dcgan_torch_nets(D.Z_DIM, D.DIV)
    z, images = (torch.from_numpy(a) for a in D.inputs())
    params = [*generator.parameters(), *discriminator.parameters()]
    optimizer = torch.optim.Adam(params, lr=1e-3)
    norms = {id(p) for m in generator if "BatchNorm" in type(m).__name__
             for p in m.parameters()}
    in_d_job = {id(p) for p in discriminator.parameters()} | norms
    in_g_job = {id(p) for p in generator.parameters()}
    ones, zeros = torch.ones(len(z), 1), torch.zeros(len(z), 1)

    def train(trainable, loss):
        for p in params:
            p.requires_grad_(id(p) in trainable)
        optimizer.zero_grad(set_to_none=True)
        value = loss()
        value.backward()
        optimizer.step()
        return float(value.detach())

    def step():
        d_loss = train(in_d_job, lambda: F.binary_cross_entropy_with_logits(
            discriminator(generator(z)), zeros) + F.binary_cross_entropy_with_logits(
            discriminator(images), ones))
        train(in_g_job, lambda: F.binary_cross_entropy_with_logits(
            discriminator(generator(z)), ones))
        return d_loss
    return counted(step, generator, discriminator)


# -- Wide&Deep -----------------------------------------------------------------------------
def wide_and_deep_module(tiny=False):
    """tests/models/test_wide_and_deep.py at a realistic small size (batch 512, Criteo's 13
    dense fields, 2 wide and 26 deep sparse fields, vocabularies of 200,000, embeddings of
    16, ``wdl_train_eval.py``'s seven hidden layers of 1024), or at the test's (``tiny``)."""
    from tests.models import test_wide_and_deep
    return sized(test_wide_and_deep, tiny, dict(
        BATCH=512, DENSE=13, WIDE=2, DEEP=26, WIDE_VOCAB=200_000, DEEP_VOCAB=200_000,
        EMBEDDING=16, DEEP_HIDDEN_UNITS=[1024] * 7))


def wide_and_deep_flow(tiny=False):
    W = wide_and_deep_module(tiny)
    job, inputs = W.train_job(), W.inputs()
    return lambda: job(*inputs)


def wide_and_deep_torch_net(W):
    """test_wide_and_deep.py's model in PyTorch, sized by its module ``W``: sparse
    embeddings (their gradients rows, for SparseAdam); ``forward(dense, wide, deep)``."""
    import torch
    from torch import nn

    class WideAndDeep(nn.Module):
        def __init__(self):
            super().__init__()
            self.wide = nn.Embedding(W.WIDE_VOCAB, 1, sparse=True)
            self.deep = nn.Embedding(W.DEEP_VOCAB, W.EMBEDDING, sparse=True)
            layers, features = [], W.DEEP * W.EMBEDDING + W.DENSE
            for units in W.DEEP_HIDDEN_UNITS:
                layers += [nn.Linear(features, units), nn.ReLU(), nn.Dropout(0.1)]
                features = units
            self.mlp = nn.Sequential(*layers, nn.Linear(features, 1))

        def forward(self, dense, wide, deep):
            scores = self.wide(wide).flatten(1).sum(1, keepdim=True)
            return scores + self.mlp(torch.cat([self.deep(deep).flatten(1), dense], 1))

    return WideAndDeep()


def wide_and_deep_torch(tiny=False):
    """LazyAdam (0.01) as PyTorch has it: SparseAdam on the embedding tables (only the rows
    a batch looked up change), Adam on the dense layers."""
    import torch
    W = wide_and_deep_module(tiny)
    net = wide_and_deep_torch_net(W)
    tables = [net.wide.weight, net.deep.weight]
    optimizers = [torch.optim.SparseAdam(tables, lr=0.01),
                  torch.optim.Adam(net.mlp.parameters(), lr=0.01)]
    labels, dense, wide, deep = W.inputs()
    labels, dense = torch.from_numpy(labels).float(), torch.from_numpy(dense)
    wide, deep = torch.from_numpy(wide).long(), torch.from_numpy(deep).long()

    def step():
        for optimizer in optimizers:
            optimizer.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(dense, wide, deep),
                                                                    labels)
        loss.backward()
        for optimizer in optimizers:
            optimizer.step()
        return float(loss.detach())
    return counted(step, net)


MODELS = {"resnet50": classifier_pair("resnet50"),
          "bert_base": (bert_base_flow, bert_base_torch),
          "resnext50": classifier_pair("resnext50"),
          "alexnet": classifier_pair("alexnet"),
          "vgg16_bn": classifier_pair("vgg16_bn"),
          "mobilenet_v2": classifier_pair("mobilenet_v2"),
          "inception_v3": classifier_pair("inception_v3"),
          "dcgan": (dcgan_flow, dcgan_torch),
          "wide_and_deep": (wide_and_deep_flow, wide_and_deep_torch)}


def _fresh(seed=0):
    import torch
    flow.clear_default_session()
    flow.random.seed(seed)
    torch.manual_seed(seed)


def check(models, steps=8) -> int:
    """Each model at the zoo tests' size: the two frameworks' parameter counts and the
    losses of ``steps`` steps on one batch; 1 where a count differs or a loss did not
    fall."""
    failed = 0
    for model in models:
        make_flow, make_torch = MODELS[model]
        _fresh()
        ours = make_flow(tiny=True)
        our_losses = [float(np.mean(ours())) for _ in range(steps)]
        ours_count = flow_parameter_count()
        theirs = make_torch(tiny=True)
        their_losses = [theirs() for _ in range(steps)]
        same = ours_count == theirs.parameters
        falls = our_losses[-1] < our_losses[0] and their_losses[-1] < their_losses[0]
        failed += not (same and falls)
        print(f"{model} (tiny): parameters aioflow {ours_count:,}, PyTorch "
              f"{theirs.parameters:,}{'' if same else ' DIFFER'}; losses aioflow "
              f"{' '.join(f'{x:.4f}' for x in our_losses)}, PyTorch "
              f"{' '.join(f'{x:.4f}' for x in their_losses)}"
              f"{'' if falls else ' NOT FALLING'}", flush=True)
    return 1 if failed else 0


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
    parser.add_argument("--check", action="store_true",
                        help="tiny models: parameter counts and falling losses, no timing")
    args = parser.parse_args()
    import torch
    torch.set_num_threads(2)
    if args.check:
        return check(args.models.split(","))
    for model in args.models.split(","):
        make_flow, make_torch = MODELS[model]
        _fresh()
        ours, theirs = make_flow(), make_torch()
        ours(), theirs()                        # compile, allocate, warm up
        print(f"{model}: parameters aioflow {flow_parameter_count():,}, PyTorch "
              f"{theirs.parameters:,}", flush=True)
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
    raise SystemExit(main())
