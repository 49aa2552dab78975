"""``load_data``, the helper that the seed documents' older (Chinese) scripts import.

Those scripts start with ``from mnist_util import load_data`` and call
``load_data(BATCH_SIZE)`` or ``load_data(BATCH_SIZE, BATCH_SIZE)``, then iterate
``zip(train_images, train_labels)`` feeding ``(BATCH_SIZE, 1, 28, 28)`` float32
images and ``(BATCH_SIZE,)`` int32 labels to their jobs. Put this file next to such a
script (or run it from ``examples/``) and it runs unchanged.

>>> import inspect
>>> list(inspect.signature(load_data).parameters)
['train_batch_size', 'test_batch_size']
"""
import aioflow as flow


def load_data(train_batch_size=100, test_batch_size=None):
    """``(train_images, train_labels), (test_images, test_labels)`` as
    :func:`aioflow.data.load_mnist` returns them: images float32 in [0, 1] shaped
    ``(n_batches, B, 1, 28, 28)``, labels int32 shaped ``(n_batches, B)``; MNIST when
    it is cached or downloadable, else the 10,000 real MNIST digits bundled with
    aioflow. ``test_batch_size`` defaults to ``train_batch_size``."""
    if test_batch_size is None:
        test_batch_size = train_batch_size
    return flow.data.load_mnist(train_batch_size, test_batch_size)
