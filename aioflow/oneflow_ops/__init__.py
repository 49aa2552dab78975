"""OneFlow v0.3.4's public names, defined here and re-exported by the public namespaces.

The layout rule, as JAX's ``_src``: a module here defines OneFlow names (``flow.gather``,
``flow.math.add``, ``flow.nn.conv2d``, ``flow.layers.dense``, ``flow.user_op_builder``,
...) as functions that build ops of :mod:`aioflow.ops`; the public namespaces --
``aioflow`` itself (``flow.*``) and the namespace modules ``flow.math``, ``flow.nn``,
``flow.layers``, ``flow.losses``, ``flow.regularizers``, ``flow.system`` -- only import
and re-export them (``from .oneflow_ops.math_api import abs as abs``). Users reach these
names through those namespaces; nothing here imports a public namespace. Each name's
module is the one its namespace's import names:

* ``flow.math``: ``math_api`` (arithmetic, reductions and what OneFlow composed from
  them; importing it binds Python's operators on Blobs), ``math_more``, ``math_grads``;
* ``flow.nn``: ``nn_api`` (activations, softmax and its losses, normalization with given
  statistics, dropout), ``nn_conv2d`` (1-d and 2-d convolution and pooling), ``nn_conv``
  (3-d and transposed convolutions, pixel shuffles), ``nn_norm`` (InstanceNorm,
  GroupNorm), ``loss_functions`` (the losses with PyTorch's names);
* ``flow.layers``: ``layers_api`` (dense, conv1d/2d, batch and layer norm, prelu, and the
  helpers every layer shares), ``layers_more``, ``resample`` (``upsample_2d``),
  ``ordinal_encoder``;
* ``flow.losses``, ``flow.regularizers``: ``losses_api``, ``regularizers_api``;
* top-level tensor ops: ``ops_api`` (matmul, reshape, concat, ...), ``array_ops`` (gather,
  one_hot, pad, sort, ...), ``dynamic_api`` (argwhere, where, ...), ``scatter_api``,
  ``view_ops``, ``resample``, ``micro_batch``, ``assign_api``, ``tensor_buffer_api``,
  ``object_bbox``, ``ordinal_encoder``, ``margin_loss``;
* building ops by OneFlow type name: ``user_op_builder``, its table ``user_op_table``
  with ``user_op_system`` (the op types of OneFlow's job passes) and ``user_op_spec``.

The modules import one another one way, from ``ops_api`` (which needs none of them)
through ``dynamic_api``, ``math_api``, ``array_ops``, ``nn_api``, ``nn_conv2d``,
``nn_conv``, ``layers_api`` up to ``layers_more``, ``nn_norm`` and ``user_op_table``,
all at the top of the module. A new OneFlow name goes into the module here whose kind it
shares (or a new one) and is re-exported by its namespace (tests/test_public_namespaces.py
checks that the namespaces only re-export); a namespace of its own (like
``flow.quantization``) stays a top-level module of ``aioflow``. This package imports
nothing itself.
"""
