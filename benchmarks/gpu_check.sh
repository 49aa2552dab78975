#!/usr/bin/env bash
# The prepared GPU run (issues 26 and 27): everything a lent GPU machine's minutes are for,
# in one command, each stage under its own time budget, logs under $OUT (8 files at most).
#
#   bash benchmarks/gpu_check.sh             # on the GPU machine, from the repository root
#   bash benchmarks/gpu_check.sh --dry-run   # here, on the CPU: same stages, the strict /
#                                            # simulated backends, tiny sizes
#   bash benchmarks/gpu_check.sh --torch-compile   # adds the zoo-compile stage (minutes)
#
# On the GPU machine it first installs what its image lacks from the wheels carried in
# .whl/ (git-ignored; see docs/benchmarks.md for the download command): pytest-asyncio
# always, MPICH (unpacked, for mpiexec and libmpi) and mpi4py only where the image's own
# cannot run. Stages, in order:
#   env       nvidia-smi and the versions, so the figures name their device
#   gpu_tests pytest -m gpu (CuPy backend, fusion, CUDA graphs, 2-rank CuPy, COCO on CuPy,
#             two device parts of one process on one GPU)
#   matrix    the op matrix, training, checkpoint, result-form, example, seed-script, model
#             zoo, batch-gather, watch, dynamic-input and conv-layer tests, every job on
#             the GPU (AIOFLOW_DEVICE=gpu)
#   parity    benchmarks/gpu_parity.py: numpy vs CuPy, MLP and LeNet, 10 and 30 steps
#   depth     benchmarks/pipeline_depth.py --device gpu (images/s at depth 1-3, GPU busy,
#             loop gap, PyTorch CUDA eager)
#   steps     benchmarks/train_step.py --device gpu (eager / fused / graph vs PyTorch)
#   zoo-*     issue 27, all four into zoo.log: zoo-await (benchmarks/await_step.py: the
#             awaited vs the blocking step, MLP and LeNet batch 100), zoo-steps
#             (benchmarks/zoo_steps.py: ResNet-50 and BERT-base batch 32, eager / fused /
#             graph vs PyTorch CUDA eager), zoo-profile (benchmarks/op_profile.py: one eager
#             step op by op, LeNet batch 1000 and ResNet-50 batch 32), zoo-b128 (ResNet-50
#             batch 128); with --torch-compile, zoo-compile (torch.compile(mode=
#             "reduce-overhead") beside PyTorch eager and aioflow's graph: minutes)
# summary.txt gets one line per stage (exit code, seconds used of its budget).
set -u
cd "$(dirname "$0")/.."
REPO=$PWD
DRY=0
TORCH_COMPILE=0
for arg in "$@"; do
    case $arg in
        --dry-run) DRY=1 ;;
        --torch-compile) TORCH_COMPILE=1 ;;
        *) echo "gpu_check.sh: unknown option $arg (--dry-run, --torch-compile)" >&2; exit 2 ;;
    esac
done
OUT=${OUT:-/tmp/aioflow_gpu_check}
mkdir -p "$OUT"
: > "$OUT/summary.txt"
T0=$(date +%s)

stage() {   # stage NAME BUDGET_SECONDS COMMAND...: logs to $OUT/<NAME up to its first ->.log
    local name=$1 budget=$2
    shift 2
    local start rc log="$OUT/${name%%-*}.log"
    start=$(date +%s)
    echo "== $name (budget ${budget}s) ==" >> "$log"
    PYTHONUNBUFFERED=1 timeout -k 5 "$budget" "$@" >> "$log" 2>&1
    rc=$?
    local line="stage $name: rc=$rc in $(( $(date +%s) - start ))s of ${budget}s (t=$(( $(date +%s) - T0 ))s)"
    [ $rc -eq 124 ] && line="$line TIMED OUT"
    echo "$line" | tee -a "$OUT/summary.txt"
    tail -n 3 "$log" | sed 's/^/    /' | tee -a "$OUT/summary.txt"
}

# -- set-up: carried wheels, MPI -----------------------------------------------------------
PY=${GPU_CHECK_PYTHON:-python3}     # the interpreter (tests pass their own)
if [ $DRY -eq 1 ]; then
    [ -z "${GPU_CHECK_PYTHON:-}" ] && [ -x .venv/bin/python ] && PY=$REPO/.venv/bin/python
    DEVICE=strict
else
    DEVICE=gpu
    SITE=/tmp/aioflow_site
    if ls .whl/pytest_asyncio-*.whl >/dev/null 2>&1; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
            .whl/pytest_asyncio-*.whl > "$OUT/env.log" 2>&1
    fi
    export PYTHONPATH=$SITE
    if ! { $PY -c "from mpi4py import MPI" && command -v mpiexec; } >/dev/null 2>&1; then
        if ls .whl/mpich-*.whl >/dev/null 2>&1; then   # pip --target drops its lib/ folder
            $PY -m zipfile -e .whl/mpich-*.whl /tmp/aioflow_mpich
            MPICH=$(echo /tmp/aioflow_mpich/mpich-*.data/data)
            chmod +x "$MPICH"/bin/*
            export PATH=$MPICH/bin:$PATH LD_LIBRARY_PATH=$MPICH/lib:${LD_LIBRARY_PATH:-}
        fi
        if ! $PY -c "from mpi4py import MPI" >/dev/null 2>&1 && ls .whl/mpi4py-*.whl >/dev/null 2>&1; then
            $PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" \
                .whl/mpi4py-*.whl >> "$OUT/env.log" 2>&1
        fi
    fi
fi
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
export AIOFLOW_OFFLINE=1
# The GPU machine runs commands as root, and its Open MPI's mpiexec refuses root unless told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

stage env 25 bash -c "(command -v nvidia-smi >/dev/null && nvidia-smi \
    --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv); \
    echo cores \$(nproc); $PY benchmarks/device_report.py; echo mpiexec \$(command -v mpiexec)"

XDIST=""
if $PY -c "import xdist" >/dev/null 2>&1; then XDIST="-n 8"; fi
PYTEST="$PY -m pytest -q -p no:cacheprovider -p no:benchmark -rfEs --continue-on-collection-errors"
# Every job of these on the GPU (the dry run collects them, so a wrong path shows here)
MATRIX_TESTS="tests/ops tests/test_variables_and_training.py tests/test_checkpoint_api.py \
    tests/test_job_results.py tests/test_examples.py tests/runtime/test_result_forms.py \
    tests/test_seed_scripts.py tests/models tests/test_gather_batch_dims.py tests/test_watch.py \
    tests/test_dynamic_inputs.py tests/test_oneflow_conv_layers.py"
# Issue 27's stages: the same command lines in the dry run, at tiny sizes on the simulated
# GPU (which captures and replays steps as CUDA graphs are) and the strict backend
if [ $DRY -eq 1 ]; then
    ZOO="--device simulated --tiny --steps 2 --warmup 2"
    PROFILE="--device strict --tiny --steps 1"
    AWAIT="--device simulated --models mlp:4 --rounds 2 --steps 2 --warmup 2"
    R32=resnet50:2 R128=mlp:10 BERT32=bert_base:2 LENET100=lenet:2 LENET1000=lenet:2
else
    ZOO="--device gpu --steps 6" PROFILE="--device gpu" AWAIT="--device gpu"
    R32=resnet50:32 R128=resnet50:128 BERT32=bert_base:32 LENET100=lenet:100 \
        LENET1000=lenet:1000
fi
CASES="'aioflow eager' 'aioflow fused' 'aioflow graph' 'torch eager'"

if [ $DRY -eq 1 ]; then
    # The GPU tests skip here (they say why); the device paths they cover run on strict.
    # Small sizes: tests/test_gpu_check.py runs this dry run in CI, to catch a typo here
    # before a GPU's minutes are spent on it.
    stage gpu_tests 300 $PYTEST -m gpu tests/backends tests/distributed/test_mpi.py \
        tests/data/test_coco_reader.py tests/test_devices_in_process.py
    stage matrix 300 bash -c "set -o pipefail; AIOFLOW_DEVICE=strict $PYTEST tests/ops/test_op_matrix.py \
        -k 'relu or matmul' && AIOFLOW_DEVICE=strict $PYTEST --collect-only $MATRIX_TESTS | tail -n 1"
    stage parity 300 bash -c "cd benchmarks && $PY gpu_parity.py --device strict --steps 3 --models mlp"
    stage depth 120 bash -c "cd benchmarks && $PY pipeline_depth.py --device simulated --batches 4 --rounds 1 --models mlp"
    stage steps 300 bash -c "cd benchmarks && $PY train_step.py --device cpu --images 300 --batches 100 \
        --models mlp --cases 'aioflow eager' 'aioflow fused' 'aioflow graph'"
    Z=300
else
    # Budgets sum to 9 minutes at most (the H200 took under 3 before issue 27's stages): a
    # start and a rerun of the stages that matter fit in a session's 15 device minutes.
    stage gpu_tests 100 $PYTEST -v -m gpu tests/backends tests/distributed/test_mpi.py \
        tests/data/test_coco_reader.py tests/test_devices_in_process.py
    stage matrix 140 env AIOFLOW_DEVICE=gpu $PYTEST $XDIST $MATRIX_TESTS
    stage parity 35 bash -c "cd benchmarks && $PY gpu_parity.py"
    stage depth 45 bash -c "cd benchmarks && $PY pipeline_depth.py --device gpu --batches 60 --rounds 3"
    stage steps 40 bash -c "cd benchmarks && $PY train_step.py --device gpu --images 3000 \
        --cases $CASES"
    Z=0
fi
# Budgets on the GPU (Z=0); the dry run's are Z=300 seconds longer (2 shared CPU cores)
stage zoo-await $(( Z + 20 )) bash -c "cd benchmarks && $PY await_step.py $AWAIT"
stage zoo-steps $(( Z + 70 )) bash -c "cd benchmarks && $PY zoo_steps.py $ZOO \
    --models $R32 $BERT32 --cases $CASES"
stage zoo-profile $(( Z + 30 )) bash -c "cd benchmarks && $PY op_profile.py $PROFILE \
    --models $LENET1000 $R32"
stage zoo-b128 $(( Z + 35 )) bash -c "cd benchmarks && $PY zoo_steps.py $ZOO --models $R128 \
    --cases $CASES"
if [ $TORCH_COMPILE -eq 1 ]; then   # compiling takes minutes a model: not in the default run
    stage zoo-compile $(( Z + 300 )) bash -c "cd benchmarks && $PY zoo_steps.py $ZOO \
        --models $LENET100 $LENET1000 $R32 $BERT32 \
        --cases 'aioflow graph' 'torch eager' 'torch compile'"
fi
echo "total $(( $(date +%s) - T0 ))s" | tee -a "$OUT/summary.txt"
