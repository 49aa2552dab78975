"""DCGAN as OneFlow's ``Generative/dcgan.py`` writes it: the old API (``FixedTensorDef``,
``global_function(func_config)``, ``train.primary_lr`` + ``model_update_conf(adam)`` +
``flow.losses.add_loss``), a generator of dense + transposed convolutions (``output_shape``
carrying the input's channels, as its ``layers.deconv2d`` passes them) and a discriminator
of convolutions, over the same variables in two jobs that train them in turn, each with
the other's variables declared ``trainable=False``. Widths divided by 8, 28x28 images."""
import numpy as np
import pytest

import aioflow as flow

BATCH, Z_DIM, DIV = 4, 16, 8


def deconv2d(input, filters, size, name, strides=2, trainable=True):
    weight = flow.get_variable(name + "-weight", shape=(input.shape[1], filters, size, size),
                               dtype=input.dtype,
                               initializer=flow.random_normal_initializer(stddev=0.02),
                               trainable=trainable)
    output_shape = (input.shape[0], input.shape[1], input.shape[2] * strides,
                    input.shape[3] * strides)
    return flow.nn.conv2d_transpose(input, weight, strides=[strides, strides],
                                    output_shape=output_shape, padding="SAME",
                                    data_format="NCHW", name=name)


def conv2d(input, filters, size, name, strides=2, trainable=True):
    weight = flow.get_variable(name + "-weight", shape=(filters, input.shape[1], size, size),
                               dtype=input.dtype,
                               initializer=flow.random_normal_initializer(stddev=0.02),
                               trainable=trainable)
    bias = flow.get_variable(name + "-bias", shape=(filters,), dtype=input.dtype,
                             initializer=flow.zeros_initializer(), trainable=trainable)
    output = flow.nn.conv2d(input, weight, strides, "SAME", "NCHW", name=name)
    return flow.nn.bias_add(output, bias, "NCHW")


def dense(input, units, name, trainable=True):
    return flow.layers.dense(input, units, kernel_initializer=flow.random_normal_initializer(
        stddev=0.02), trainable=trainable, name=name)


def batchnorm(input, name, axis=1):
    return flow.layers.batch_normalization(input, axis=axis, name=name)


def generator(z, trainable=True):
    h0 = dense(z, 7 * 7 * 256 // DIV, name="g_fc1", trainable=trainable)
    h0 = flow.nn.leaky_relu(batchnorm(h0, "g_bn1"), 0.3)
    h0 = flow.reshape(h0, (-1, 256 // DIV, 7, 7))
    h1 = flow.nn.leaky_relu(batchnorm(deconv2d(h0, 128 // DIV, 5, strides=1, name="g_deconv1",
                                               trainable=trainable), "g_bn2"), 0.3)
    h2 = flow.nn.leaky_relu(batchnorm(deconv2d(h1, 64 // DIV, 5, strides=2, name="g_deconv2",
                                               trainable=trainable), "g_bn3"), 0.3)
    return flow.math.tanh(deconv2d(h2, 1, 5, strides=2, name="g_deconv3", trainable=trainable))


def discriminator(img, trainable=True):
    h0 = flow.nn.dropout(flow.nn.leaky_relu(conv2d(img, 64 // DIV, 5, "d_conv1",
                                                   trainable=trainable), 0.3), rate=0.3)
    h1 = flow.nn.dropout(flow.nn.leaky_relu(conv2d(h0, 128 // DIV, 5, "d_conv2",
                                                   trainable=trainable), 0.3), rate=0.3)
    return dense(flow.reshape(h1, (BATCH, -1)), 1, name="d_fc", trainable=trainable)


def train_jobs():
    """The script's two jobs over one set of variables: ``(train_generator,
    train_discriminator)``, Adam at 1e-3, each returning its losses (the generator's job its
    images too)."""
    func_config = flow.FunctionConfig()
    func_config.default_data_type(flow.float)
    func_config.default_logical_view(flow.scope.consistent_view())
    func_config.train.primary_lr(1e-3)
    func_config.train.model_update_conf(dict(adam_conf={}))

    @flow.global_function(func_config)
    def train_generator(z=flow.FixedTensorDef((BATCH, Z_DIM))):
        g_out = generator(z, trainable=True)
        g_logits = discriminator(g_out, trainable=False)
        g_loss = flow.nn.sigmoid_cross_entropy_with_logits(
            flow.ones_like(g_logits), g_logits, name="Gloss_sigmoid_cross_entropy_with_logits")
        flow.losses.add_loss(g_loss)
        return g_loss, g_out

    @flow.global_function(func_config)
    def train_discriminator(z=flow.FixedTensorDef((BATCH, Z_DIM)),
                            images=flow.FixedTensorDef((BATCH, 1, 28, 28))):
        g_out = generator(z, trainable=False)
        g_logits = discriminator(g_out, trainable=True)
        d_loss_fake = flow.nn.sigmoid_cross_entropy_with_logits(
            flow.zeros_like(g_logits), g_logits, name="Dloss_fake")
        d_logits = discriminator(images, trainable=True)
        d_loss_real = flow.nn.sigmoid_cross_entropy_with_logits(
            flow.ones_like(d_logits), d_logits, name="Dloss_real")
        d_loss = d_loss_fake + d_loss_real
        flow.losses.add_loss(d_loss)
        return d_loss, d_loss_fake, d_loss_real

    return train_generator, train_discriminator


def inputs(seed=0):
    """A fixed noise batch and a batch of images in [-1, 1]: ``(z, images)``."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((BATCH, Z_DIM)).astype(np.float32)
    return z, np.tanh(rng.standard_normal((BATCH, 1, 28, 28))).astype(np.float32)


@pytest.mark.filterwarnings("ignore:conv2d_transpose. output_shape:RuntimeWarning")
def test_dcgan_generator_and_discriminator_jobs_train_in_turn():
    train_generator, train_discriminator = train_jobs()
    z, images = inputs()
    d_losses, g_losses, generators = [], [], []
    generator_weights = lambda: {k: v for k, v in flow.get_all_variables().items()  # noqa: E731
                                 if k.startswith("g_") and k.endswith("-weight")}
    for _ in range(4):
        ahead = generator_weights() if d_losses else None
        d_loss, _, _ = train_discriminator(z, images).get()
        before = generator_weights()
        if ahead is not None:   # trainable=False there: the discriminator job keeps them
            assert all(np.array_equal(ahead[k], before[k]) for k in ahead)
        g_loss, g_out = train_generator(z).get()
        d_losses.append(float(d_loss.mean()))
        g_losses.append(float(g_loss.mean()))
        generators.append(before)
    assert g_out.shape == (BATCH, 1, 28, 28)
    assert d_losses[-1] < d_losses[0], d_losses        # the discriminator learns
    variables = flow.get_all_variables()
    # The discriminator job left the generator alone; the generator job moved it.
    after_d = generators[-1]
    assert any(not np.array_equal(after_d[k], variables[k]) for k in after_d)
    assert all(np.isfinite(g_losses))
