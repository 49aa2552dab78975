"""AlexNet, VGG16 with batch norm, MobileNet-v2 and Inception-v3 as OneFlow's
``Classification/cnns`` model files build them: a ``conv2d_layer`` helper over
``flow.get_variable`` + ``flow.nn.conv2d`` (+ bias, batch norm, relu), Inception's blocks
under ``flow.scope.namespace("mixed_<i>")`` with the same layer names in each branch.
Channel widths are divided by 8 (64 for the classifier heads) and each model gets the
smallest image its stride and pooling structure allows, so a step is quick on two cores."""

import aioflow as flow

from .zoo import assert_falls, batch, classifier_job, losses_of

BATCH, CLASSES, DIV = 2, 10, 8
HIDDEN = 4096 // 64   # the classifier heads' hidden units (AlexNet's, VGG's)


def conv2d_layer(name, input, filters, kernel_size=3, strides=1, padding="SAME",
                 activation="Relu", use_bias=True, groups=1, bn=False, training=True):
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    weight = flow.get_variable(
        name + "-weight", shape=(filters, input.shape[1] // groups, kh, kw), dtype=input.dtype,
        initializer=flow.variance_scaling_initializer(distribution="random_normal",
                                                      data_format="NCHW"),
        regularizer=flow.regularizers.l2(0.00005))
    output = flow.nn.conv2d(input, weight, strides, padding, "NCHW", 1, groups=groups,
                            name=name)
    if use_bias:
        bias = flow.get_variable(name + "-bias", shape=(filters,), dtype=input.dtype,
                                 initializer=flow.zeros_initializer())
        output = flow.nn.bias_add(output, bias, "NCHW")
    if bn:
        output = flow.layers.batch_normalization(output, axis=1, momentum=0.997,
                                                 epsilon=1.001e-5, training=training,
                                                 name=name + "_bn")
    if activation == "Relu":
        output = flow.nn.relu(output)
    elif activation == "Relu6":
        output = flow.clip_by_value(output, 0.0, 6.0)
    return output


def classifier(pooled, hidden, name="fc", dropout=True):
    x = flow.reshape(pooled, (pooled.shape[0], -1))
    init = flow.xavier_uniform_initializer()
    for i, units in enumerate(hidden):
        x = flow.layers.dense(x, units, activation=flow.nn.relu, kernel_initializer=init,
                              name=f"{name}{i + 1}")
        if dropout:
            x = flow.nn.dropout(x, rate=0.5)
    return flow.layers.dense(x, CLASSES, kernel_initializer=init, name=f"{name}_final")


def alexnet(images):
    conv1 = conv2d_layer("conv1", images, 64 // DIV, kernel_size=11, strides=4,
                         padding="VALID")
    pool1 = flow.nn.avg_pool2d(conv1, 3, 2, "VALID", "NCHW", name="pool1")
    conv2 = conv2d_layer("conv2", pool1, 192 // DIV, kernel_size=5)
    pool2 = flow.nn.avg_pool2d(conv2, 3, 2, "VALID", "NCHW", name="pool2")
    conv3 = conv2d_layer("conv3", pool2, 384 // DIV)
    conv4 = conv2d_layer("conv4", conv3, 384 // DIV)
    conv5 = conv2d_layer("conv5", conv4, 256 // DIV)
    pool5 = flow.nn.avg_pool2d(conv5, 3, 2, "VALID", "NCHW", name="pool5")
    return classifier(pool5, [HIDDEN, HIDDEN])


def vgg16_bn(images):
    x = images
    for stage, (count, filters) in enumerate([(2, 64), (2, 128), (3, 256), (3, 512),
                                              (3, 512)]):
        for i in range(count):
            x = conv2d_layer(f"conv{stage + 1}_{i + 1}", x, filters // DIV, bn=True)
        x = flow.nn.max_pool2d(x, 2, 2, "VALID", "NCHW", name=f"pool{stage + 1}")
    return classifier(x, [HIDDEN, HIDDEN])


def inverted_residual_unit(data, num_filter, stride, expansion, prefix, shortcut):
    hidden = data.shape[1] * expansion
    x = data
    if expansion != 1:
        x = conv2d_layer(prefix + "-expand", x, hidden, 1, 1, activation="Relu6",
                         use_bias=False, bn=True)
    x = conv2d_layer(prefix + "-dwise", x, hidden, 3, stride, activation="Relu6",
                     use_bias=False, groups=hidden, bn=True)
    x = conv2d_layer(prefix + "-linear", x, num_filter, 1, 1, activation=None,
                     use_bias=False, bn=True)
    return flow.math.add(data, x, name=prefix + "-shortcut") if shortcut else x


def mobilenet_v2(images):
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]   # expansion, channels, repeats, stride
    x = conv2d_layer("conv1", images, 32 // DIV, 3, 2, activation="Relu6", use_bias=False,
                     bn=True)
    for i, (t, c, n, s) in enumerate(settings):
        for j in range(n):
            channels = max(c // DIV, 2)
            x = inverted_residual_unit(x, channels, s if j == 0 else 1, t,
                                       f"bottleneck{i}_{j}", j > 0 and x.shape[1] == channels)
    x = conv2d_layer("conv_last", x, 1280 // DIV, 1, 1, activation="Relu6", use_bias=False,
                     bn=True)
    pool = flow.nn.avg_pool2d(x, x.shape[2], 1, "VALID", "NCHW", name="pool_last")
    return classifier(pool, [], dropout=False)


def _branch(x, layers):
    """Inception's branches: layers named conv0, conv1... under the branch's namespace."""
    for i, (filters, kernel, strides, padding) in enumerate(layers):
        x = conv2d_layer(f"conv{i}", x, max(filters // DIV, 2), kernel, strides, padding,
                         bn=True, use_bias=False)
    return x


def _pool_branch(x, kind, proj=None):
    pool = (flow.nn.avg_pool2d(x, 3, 1, "SAME", "NCHW", name="pool") if kind == "avg" else
            flow.nn.max_pool2d(x, 3, 2, "VALID", "NCHW", name="pool0"))
    return _branch(pool, [(proj, 1, 1, "SAME")]) if proj else pool


def _inception_e_split(y):
    """InceptionE's 3x3 branch: one 1x1 conv, then a 1x3 and a 3x1 conv side by side."""
    y = _branch(y, [(384, 1, 1, "SAME")])
    wide = conv2d_layer("conv1", y, 384 // DIV, [1, 3], 1, "SAME", bn=True, use_bias=False)
    tall = conv2d_layer("conv2", y, 384 // DIV, [3, 1], 1, "SAME", bn=True, use_bias=False)
    return flow.concat([wide, tall], axis=1)


def _mixed(index, x, branches):
    outputs = []
    with flow.scope.namespace(f"mixed_{index}"):
        for name, build in branches:
            with flow.scope.namespace(name):
                outputs.append(build(x))
        return flow.concat(values=outputs, axis=1, name="concat")


def inception_v3(images):
    with flow.scope.namespace("conv0"):
        x = _branch(images, [(32, 3, 2, "VALID"), (32, 3, 1, "VALID"), (64, 3, 1, "SAME")])
    x = flow.nn.max_pool2d(x, 3, 2, "VALID", "NCHW", name="pool0")
    with flow.scope.namespace("conv1"):
        x = _branch(x, [(80, 1, 1, "VALID"), (192, 3, 1, "VALID")])
    x = flow.nn.max_pool2d(x, 3, 2, "VALID", "NCHW", name="pool1")
    for i, pool_proj in enumerate([32, 64, 64]):                      # InceptionA x3
        x = _mixed(i, x, [
            ("branch1x1", lambda y: _branch(y, [(64, 1, 1, "SAME")])),
            ("branch5x5", lambda y: _branch(y, [(48, 1, 1, "SAME"), (64, 5, 1, "SAME")])),
            ("branch3x3dbl", lambda y: _branch(y, [(64, 1, 1, "SAME"), (96, 3, 1, "SAME"),
                                                   (96, 3, 1, "SAME")])),
            ("branch_pool", lambda y, p=pool_proj: _pool_branch(y, "avg", p))])
    x = _mixed(3, x, [                                                 # InceptionB
        ("branch3x3", lambda y: _branch(y, [(384, 3, 2, "VALID")])),
        ("branch3x3dbl", lambda y: _branch(y, [(64, 1, 1, "SAME"), (96, 3, 1, "SAME"),
                                               (96, 3, 2, "VALID")])),
        ("branch_pool", lambda y: _pool_branch(y, "max"))])
    for i, mid in enumerate([128, 160, 160, 192]):                     # InceptionC x4
        x = _mixed(4 + i, x, [
            ("branch1x1", lambda y: _branch(y, [(192, 1, 1, "SAME")])),
            ("branch7x7", lambda y, m=mid: _branch(y, [(m, 1, 1, "SAME"), (m, [1, 7], 1, "SAME"),
                                                       (192, [7, 1], 1, "SAME")])),
            ("branch7x7dbl", lambda y, m=mid: _branch(y, [
                (m, 1, 1, "SAME"), (m, [7, 1], 1, "SAME"), (m, [1, 7], 1, "SAME"),
                (m, [7, 1], 1, "SAME"), (192, [1, 7], 1, "SAME")])),
            ("branch_pool", lambda y: _pool_branch(y, "avg", 192))])
    x = _mixed(8, x, [                                                 # InceptionD
        ("branch3x3", lambda y: _branch(y, [(192, 1, 1, "SAME"), (320, 3, 2, "VALID")])),
        ("branch7x7x3", lambda y: _branch(y, [(192, 1, 1, "SAME"), (192, [1, 7], 1, "SAME"),
                                              (192, [7, 1], 1, "SAME"), (192, 3, 2, "VALID")])),
        ("branch_pool", lambda y: _pool_branch(y, "max"))])
    for i in range(2):                                                 # InceptionE x2
        x = _mixed(9 + i, x, [
            ("branch1x1", lambda y: _branch(y, [(320, 1, 1, "SAME")])),
            ("branch3x3", _inception_e_split),
            ("branch_pool", lambda y: _pool_branch(y, "avg", 192))])
    pool = flow.nn.avg_pool2d(x, x.shape[2], 1, "VALID", "NCHW", name="pool3")
    return classifier(pool, [], dropout=False)


def _trains(model, image, steps=5, lr=0.01):
    images, labels = batch((BATCH, 3, image, image), CLASSES)
    assert_falls(losses_of(classifier_job(model, BATCH, image, lr), images, labels,
                           steps=steps))


def test_alexnet_trains():
    _trains(alexnet, 67)          # 11x11 stride-4 conv then three 3x3 stride-2 pools


def test_vgg16_bn_trains():
    _trains(vgg16_bn, 32)         # five 2x2 pools


def test_mobilenet_v2_trains():
    _trains(mobilenet_v2, 64)   # five stride-2 stages; 2x2 left for batch norm to see


def test_inception_v3_trains_with_one_variable_per_namespace():
    _trains(inception_v3, 75)     # the smallest input of its stem and reductions
    names = set(flow.get_all_variables())
    # "conv0" in every branch of every mixed block: distinct variables, OneFlow's names
    assert {"mixed_0-branch1x1-conv0-weight", "mixed_0-branch5x5-conv0-weight",
            "mixed_1-branch1x1-conv0-weight", "mixed_10-branch_pool-conv0-weight"} <= names
