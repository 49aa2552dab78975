"""OneFlow v0.3.4's further public names, written on top of the op registry.

The layout rule: a module here defines OneFlow names (``flow.gather``, ``flow.nn.GroupNorm``,
``flow.math.lgamma``, ``flow.user_op_builder``, ...) as functions that build ops of
:mod:`aioflow.ops`; the public namespaces -- ``aioflow`` itself (``flow.*``) and the
namespace modules ``flow.nn``, ``flow.math``, ``flow.layers``, ``flow.system`` -- import and
re-export them. Users reach these names through those namespaces, not through the modules
here. Each name's module is the one its docstring or the namespace's import names:

* top-level tensor ops: ``ops_api`` (matmul, reshape, concat, ...), ``array_ops`` (gather,
  one_hot, pad, sort, ...), ``scatter_api``, ``dynamic_api``, ``view_ops``, ``resample``,
  ``micro_batch``, ``assign_api``, ``tensor_buffer_api``, ``object_bbox``,
  ``ordinal_encoder``, ``margin_loss``;
* more of a namespace: ``nn_conv`` and ``nn_norm`` (``flow.nn``), ``loss_functions``
  (``flow.nn``'s loss names), ``math_more`` and ``math_grads`` (``flow.math``),
  ``layers_more`` (``flow.layers``);
* building ops by OneFlow type name: ``user_op_builder`` and its table ``user_op_table``.

A new OneFlow name goes into the module here whose kind it shares (or a new one), and is
re-exported by its namespace; a namespace of its own (like ``flow.quantization``) stays a
top-level module of ``aioflow``. This package imports nothing itself, so importing one of
its modules keeps the import order of the namespaces that use it.
"""
